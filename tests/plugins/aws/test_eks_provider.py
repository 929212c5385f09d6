"""eks: Kubeflow manifests on an EKS cluster found by name -- describe_cluster through moto (server
mode, the aws_double), the bearer token a presigned STS call, the cluster the loopback API server."""
import hashlib
import os
import urllib.request

import pytest

from doubles.aws_double import REGION, AwsDouble, session
from doubles.aws_double import eks_token_ok as token_ok
from cloudtrain.spec.errors import BadInput, PlatformError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain.providers.provider import State
from cloudtrain_aws.eks import EksProvider, eks_token
from conftest import run_cli, write_job
from crd_schemas import validate
from doubles.kube_double import FakeKube


@pytest.fixture
def cloud(monkeypatch):
    monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "0")  # every status() reads the cluster
    with AwsDouble() as aws, FakeKube(token=token_ok) as kube:
        aws.eks_cluster("train", kube.url)
        yield aws, kube


def job(tmp_path, cluster="train", extra=""):
    return write_job(tmp_path, f"""
        name: ekjob
        command: python train.py
        image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1
        distribution: {{type: ddp, nodes: 2, procs_per_node: 8}}
        resources: {{gpus_per_node: 8}}
        providers:
          eks: {{cluster: {cluster}, region: {REGION}, namespace: ml}}
        {extra}
        """)


def test_the_token_is_a_presigned_sts_call_and_nothing_is_sent():
    assert token_ok("Bearer " + eks_token(session(), "train", REGION))


def worker_pod(tmp_path, resources, rdma="auto"):
    path = job(tmp_path, extra=f"network: {{rdma: {rdma}}}")
    path.write_text(path.read_text().replace("resources: {gpus_per_node: 8}", f"resources: {resources}"))
    rendered = get_provider("eks").render(load_job(path))
    for artifact in rendered.artifacts:
        validate(artifact.content)
    return rendered.artifacts[-1].content["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]


@pytest.mark.parametrize("resources,instance,efa,device_rdma", [
    # EC2 DescribeInstanceTypes (the catalog): p4d 4 EFA, p5 32; RDMA read per AWS's EFA guide
    ("{accelerator: A100, gpus_per_node: 8}", "p4d.24xlarge", "4", True),
    ("{accelerator: H100, gpus_per_node: 8}", "p5.48xlarge", "32", True),
    ("{accelerator: A10G, gpus_per_node: 8}", "g5.48xlarge", "1", False),
])
def test_an_accelerator_selects_its_nodes_and_all_their_efa_devices(tmp_path, resources, instance, efa, device_rdma):
    pod = worker_pod(tmp_path, resources)
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": instance}
    c = pod["containers"][0]
    assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == efa
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["FI_PROVIDER"] == "efa"
    assert ("FI_EFA_USE_DEVICE_RDMA" in env) is device_rdma  # never on g5: libfabric aborts without RDMA read
    # EFA's out-of-order delivery breaks NCCL's LL/LL128 protocols (aws-ofi-nccl issue #76); SageMaker's
    # launchers set NCCL_PROTO=simple on EFA (sagemaker-training-toolkit PR #196)
    assert env["NCCL_PROTO"] == "simple"


def test_gpus_alone_select_no_nodes_and_rdma_off_no_efa(tmp_path):
    pod = worker_pod(tmp_path, "{gpus_per_node: 8}")
    assert "nodeSelector" not in pod and "vpc.amazonaws.com/efa" not in pod["containers"][0]["resources"]["limits"]
    off = worker_pod(tmp_path, "{accelerator: A100, gpus_per_node: 8}", rdma="off")
    assert off["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert "vpc.amazonaws.com/efa" not in off["containers"][0]["resources"]["limits"]


def test_rdma_on_asks_for_efa_devices_and_validates_against_the_crd(tmp_path):
    rendered = get_provider("eks").render(load_job(job(tmp_path, extra="network: {rdma: on}")))
    for artifact in rendered.artifacts:
        validate(artifact.content)
    pod = rendered.artifacts[-1].content["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "1", "hugepages-2Mi": "5120Mi"}
    assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert {"name": "FI_PROVIDER", "value": "efa"} in c["env"]
    # through the shell that prepends the launcher to the image's PYTHONPATH (issue 21 #1)
    assert c["command"][:2] == ["/bin/sh", "-c"] and "PYTHONPATH" not in {e["name"] for e in c["env"]}
    assert c["command"][4:9] == ["python3", "-m", "cloudtrain.launch", "--platform", "eks"]
    # the EKS detector builds on Kubeflow's: both ship in the launcher ConfigMap
    data = rendered.artifacts[0].content["data"]
    assert "cloudtrain_aws.eks_detect.py" in data and "cloudtrain_kubernetes.detect.py" in data


def test_submit_status_logs_cancel_list(tmp_path, cloud, home):
    aws, kube = cloud
    eks, described = aws.client("eks"), []
    eks.meta.events.register("before-call.eks.DescribeCluster", lambda **kw: described.append(1))
    provider = EksProvider(eks=eks, session=session())
    run = provider.submit(load_job(job(tmp_path)))
    assert run.handle == "eks://ml/ekjob"
    assert kube.find("pytorchjobs", "ml", "ekjob")["metadata"]["labels"]["cloudtrain.io/provider"] == "eks"
    assert len(described) == 1
    assert run.status().state is State.PENDING
    kube.start_pods("ml", "ekjob")
    kube.log("ml", "ekjob-master-0", "loss 0.1")
    assert list(run.logs()) == ["[node0] loss 0.1\n"]
    assert [s.handle for s in provider.list()] == ["eks://ml/ekjob"]
    assert run.cancel().state is State.CANCELLED
    assert len(described) == 1                                   # one client per cluster, reused


def test_an_unknown_cluster_is_a_platform_error_with_the_fix(tmp_path, cloud, home):
    aws, _ = cloud
    provider = EksProvider(eks=aws.client("eks"), session=session())
    with pytest.raises(PlatformError, match=r"ResourceNotFoundException.*check providers.eks.cluster and region"):
        provider.submit(load_job(job(tmp_path, cluster="nope")))


def test_submit_without_a_cluster_names_the_option(tmp_path, home):
    path = write_job(tmp_path, "name: x\ncommand: python t.py\nimage: i:1\n")
    with pytest.raises(BadInput, match=f"^{path}: providers.eks.cluster: is not set; eks needs it to submit"):
        EksProvider(session=session()).submit(load_job(path))


def test_cli_submit_and_status_through_the_default_credential_chain(tmp_path, cloud, home):
    aws, kube = cloud
    env = aws.env()
    proc = run_cli("submit", "-p", "eks", job(tmp_path), "--detach", env=env, check=0)
    assert "eks://ml/ekjob" in proc.stdout + proc.stderr
    kube.start_pods("ml", "ekjob")
    assert "RUNNING" in run_cli("status", "eks://ml/ekjob", env=env, check=0).stdout
    assert "eks://ml/ekjob" in run_cli("list", "-p", "eks", env=env, check=0).stdout


def test_api_trainer_submits_a_trainjob_with_efa_and_follows_it(tmp_path, cloud, home):
    aws, kube = cloud
    path = job(tmp_path, extra="network: {rdma: on}").read_text().replace(
        "namespace: ml}", "namespace: ml, api: trainer, queue: team-q}")
    (tmp_path / "job.yaml").write_text(path)
    rendered = get_provider("eks").render(load_job(tmp_path / "job.yaml"))
    for artifact in rendered.artifacts:
        validate(artifact.content)
    obj = rendered.artifacts[-1].content
    assert (obj["kind"], obj["spec"]["runtimeRef"]["name"]) == ("TrainJob", "torch-distributed")
    assert obj["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "1",
                                                                    "hugepages-2Mi": "5120Mi"}
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-q" and obj["spec"]["suspend"] is True
    env = {e["name"]: e.get("value") for e in obj["spec"]["trainer"]["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["CLOUDTRAIN_DETECTORS"] == "eks=cloudtrain_aws.eks_detect:detect"
    assert "cloudtrain_kubernetes.trainer_detect.py" in rendered.artifacts[0].content["data"]
    run = EksProvider(eks=aws.client("eks"), session=session()).submit(load_job(tmp_path / "job.yaml"))
    assert kube.count("POST", r"^/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs$") == 1
    kube.set_state("ml", "ekjob", "Suspended")
    assert (run.status().state, run.status().message) == (State.PENDING, "queued (Kueue LocalQueue team-q)")
    pods = kube.start_pods("ml", "ekjob")
    kube.log("ml", pods[1], "node 1 loss 0.2")
    assert list(run.logs()) == ["[node1] node 1 loss 0.2\n"]
    kube.finish("ml", "ekjob", "Complete")
    assert run.status().state is State.SUCCEEDED


def test_the_eks_detector_reads_a_trainjob_pod():
    from cloudtrain_aws.eks_detect import detect
    topo = detect({"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "8",
                   "PET_MASTER_ADDR": "ekjob-node-0-0.ekjob", "PET_MASTER_PORT": "29500",
                   "CLOUDTRAIN_TRAINER_RUNTIME": "torch-distributed"})
    assert (topo.platform, topo.node_rank, topo.hosts) == ("eks", 1, ["ekjob-node-0-0.ekjob", "ekjob-node-0-1.ekjob"])


def test_code_above_a_configmap_goes_to_s3_and_the_pods_get_a_presigned_url(tmp_path, cloud, home):
    # the archive (1 MiB of incompressible bytes next to the job file) cannot travel in a ConfigMap
    aws, kube = cloud
    aws.client("s3").create_bucket(Bucket="ct-eks-code")
    (tmp_path / "weights.bin").write_bytes(os.urandom(1024 * 1024))
    path = job(tmp_path)
    path.write_text(path.read_text().replace("namespace: ml}", "namespace: ml, code_store: s3://ct-eks-code/runs}"))
    rendered = get_provider("eks").render(load_job(path))
    upload = rendered.artifacts[0]
    assert upload.kind == "s3/PutObject" and upload.content["Bucket"] == "ct-eks-code"
    for artifact in rendered.artifacts[1:]:
        validate(artifact.content)
    run_cli("submit", "-p", "eks", path, "--detach", env=aws.env(), check=0)  # boto3's default chain: S3 too
    stored = aws.client("s3").get_object(Bucket="ct-eks-code", Key=upload.content["Key"])["Body"].read()
    assert hashlib.sha256(stored).hexdigest() in upload.content["Key"]
    url = kube.find("secrets", "ml", "ekjob-code-url")["stringData"]["url"]
    assert url.startswith(f"{aws.endpoint}/ct-eks-code/{upload.content['Key']}?")
    with urllib.request.urlopen(url) as response:  # what the pod's unpack step reads, no credentials
        assert response.read() == stored
    worker = kube.find("pytorchjobs", "ml", "ekjob")["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert {"name": "cloudtrain-code-url", "secret": {"secretName": "ekjob-code-url", "defaultMode": 0o444}} \
        in worker["volumes"]


@pytest.mark.parametrize("resources,option,label", [
    ("{instance_type: ml.p5.48xlarge}", "", "ml.p5.48xlarge"),          # an ml.* name: HyperPod's nodes
    ("{accelerator: H100, gpus_per_node: 8}", "hyperpod: true", "ml.p5.48xlarge"),
    ("{instance_type: p5.48xlarge}", "", "p5.48xlarge"),                # EC2's own nodes
])
def test_hyperpod_nodes_are_selected_by_their_ml_label(tmp_path, resources, option, label):
    """SageMaker HyperPod's EKS nodes carry node.kubernetes.io/instance-type: ml.p5.48xlarge (the
    SageMaker HyperPod CLI's HyperPodPytorchJob template selects them so, aws/sagemaker-hyperpod-cli);
    rewritten to p5.48xlarge, the pods stay Pending."""
    path = job(tmp_path)
    text = path.read_text().replace("resources: {gpus_per_node: 8}", f"resources: {resources}")
    if option:
        text = text.replace("namespace: ml}", f"namespace: ml, {option}}}")
    path.write_text(text)
    rendered = get_provider("eks").render(load_job(path))
    pod = rendered.artifacts[-1].content["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": label}
