"""``cloudtrain outputs`` for the Kubernetes providers: the job's output claim (storage.output:
pvc://CLAIM/PATH, mounted at /cloudtrain/output in every node pod) is copied out through a
short-lived pod of the job's image and the pods/exec API (the kubelet's v4.channel.k8s.io
websocket), with the real kubernetes client against the loopback API server, whose exec runs the
command in a local directory standing for the claim."""
import json
import os

import pytest

from cloudtrain.spec.errors import EXIT_BAD_INPUT
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from conftest import run_cli, write_job
from doubles.kube_double import FakeKube
from cloudtrain_kubernetes import podoutputs


@pytest.fixture
def kube(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "0")
    with FakeKube() as fake:
        fake.config_path = fake.kubeconfig(tmp_path / "kubeconfig")
        yield fake


def job_file(tmp_path, kube, provider, storage="storage: {output: pvc://team-out/runs/digits}", dist="ddp"):
    return write_job(tmp_path, f"""
        name: kout
        command: python train.py
        image: registry.example/train:1
        code: null
        distribution: {{type: {dist}, nodes: 2}}
        providers:
          {provider}:
            kubeconfig: {kube.config_path}
            namespace: team-a
        {storage}
        """)


def claim_with_outputs(tmp_path, kube):
    root = tmp_path / "claim-team-out"
    out = root / "runs" / "digits"
    (out / "ckpt").mkdir(parents=True)
    (out / "metrics.json").write_text('{"test_accuracy": 0.97}')
    (out / "ckpt" / "model.pt").write_bytes(os.urandom(300_000))  # binary, several exec frames
    (root / "runs" / "other.txt").write_text("not this job's")
    kube.claims[("team-a", "team-out")] = root
    return out


@pytest.mark.parametrize("provider,plural", [("kubeflow", "pytorchjobs"), ("volcano", "jobs"),
                                             ("kubeflow-trainer", "trainjobs")])
def test_outputs_copies_the_output_claim_through_a_helper_pod(tmp_path, kube, home, provider, plural):
    out = claim_with_outputs(tmp_path, kube)
    p = get_provider(provider)
    run = p.submit(load_job(job_file(tmp_path, kube, provider)))
    dest = tmp_path / "got"
    files = p.outputs(run.id, dest)
    assert sorted(f.relative_to(dest).as_posix() for f in files) == ["ckpt/model.pt", "metrics.json"]
    assert (dest / "ckpt" / "model.pt").read_bytes() == (out / "ckpt" / "model.pt").read_bytes()
    assert json.loads((dest / "metrics.json").read_text()) == {"test_accuracy": 0.97}
    assert not (dest / "other.txt").exists()          # only the job's subPath
    # the helper: the job's image, the claim read-only at the job's subPath, a deadline; then deleted
    assert kube.count("POST", r"/namespaces/team-a/pods$") == 1 and kube.count("DELETE", r"/pods/kout-outputs-") == 1
    assert not [k for k in kube.objects if k[0] == "/api/v1/pods"]


def test_the_helper_pod_reads_the_claim_read_only_in_the_jobs_image(tmp_path, kube, home):
    p = get_provider("kubeflow")
    run = p.submit(load_job(job_file(tmp_path, kube, "kubeflow")))
    obj = kube.find("pytorchjobs", "team-a", "kout")
    assert podoutputs.output_mount(obj) == ("team-out", "runs/digits")
    pod = podoutputs.helper_pod(obj, "team-out", "runs/digits", *podoutputs.job_image_and_python(obj), [])
    (c,) = pod["spec"]["containers"]
    assert c["image"] == "registry.example/train:1" and c["command"][0] == "python3"
    assert c["volumeMounts"] == [{"name": "output", "mountPath": "/cloudtrain/output", "readOnly": True,
                                  "subPath": "runs/digits"}]
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": "team-out", "readOnly": True}
    assert pod["spec"]["activeDeadlineSeconds"] > 0 and "cloudtrain.io/job" not in pod["metadata"]["labels"]
    assert run.id == "team-a/kout"


def test_a_job_without_storage_output_says_why_in_one_line(tmp_path, kube, home):
    p = get_provider("kubeflow")
    p.submit(load_job(job_file(tmp_path, kube, "kubeflow", storage="")))
    proc = run_cli("outputs", "kubeflow://team-a/kout", "-o", str(tmp_path / "x"))
    assert proc.returncode == EXIT_BAD_INPUT
    assert "has no storage.output" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert kube.count("POST", r"/pods$") == 0


def test_cli_outputs_for_eks_style_handle_of_kubeflow(tmp_path, kube, home):
    claim_with_outputs(tmp_path, kube)
    get_provider("kubeflow").submit(load_job(job_file(tmp_path, kube, "kubeflow")))
    proc = run_cli("outputs", "kubeflow://team-a/kout", "-o", str(tmp_path / "dl"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "dl" / "metrics.json").exists()


def test_eks_outputs_through_its_own_cluster_client(tmp_path, home, monkeypatch):
    """eks reaches the cluster through DescribeCluster and an STS-signed token (moto + the
    loopback API server checking the token's shape); outputs goes the same way."""
    from doubles.aws_double import REGION, AwsDouble, eks_token_ok, session
    from cloudtrain_aws.eks import EksProvider
    monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "0")
    with AwsDouble() as aws, FakeKube(token=eks_token_ok) as kube:
        aws.eks_cluster("train", kube.url)
        claim_with_outputs(tmp_path, kube)
        path = write_job(tmp_path, f"""
            name: kout
            command: python train.py
            image: registry.example/train:1
            code: null
            distribution: {{type: ddp, nodes: 2}}
            storage: {{output: pvc://team-out/runs/digits}}
            providers:
              eks: {{cluster: train, region: {REGION}, namespace: team-a}}
            """)
        provider = EksProvider(eks=aws.client("eks"), session=session())
        run = provider.submit(load_job(path))
        files = provider.outputs(run.id, tmp_path / "eks-out")
        assert sorted(f.name for f in files) == ["metrics.json", "model.pt"]
