"""sagemaker: the rendered CreateTrainingJob for every distribution type, validated with botocore's
service model; options mapped to their fields; bad options refused at file:line; the node
detector; what `render` imports."""
import json
import re
import subprocess
import sys
import warnings

import pytest

from doubles.aws_double import validate_request
from cloudtrain.extend import plugins
from cloudtrain.spec.errors import BadInput, CloudtrainWarning, JobFileError
from cloudtrain.input.loading import job_from_dict, load_job
from cloudtrain.providers.provider import Cluster
from conftest import EXAMPLES, cli_env, run_cli, write_job

ROLE = "arn:aws:iam::123456789012:role/train"
OPTIONS = {"role_arn": ROLE, "output_s3": "s3://ct-bucket/runs"}
DISTRIBUTIONS = [("ddp", 2, 2, None), ("mpi", 2, 2, None), ("horovod", 3, 1, None), ("deepspeed", 2, 1, None),
                 ("ps-worker", 3, 1, 1), ("ray", 2, 1, None), ("none", 1, 1, None)]


def job(**extra):
    data = {"name": "sm-job", "command": "python train.py --epochs 3",
            "image": "123.dkr.ecr.us-east-1.amazonaws.com/t:1",
            "distribution": {"type": "ddp", "nodes": 2, "procs_per_node": 2}, "env": {"OMP_NUM_THREADS": "1"},
            "providers": {"sagemaker": dict(OPTIONS)}}
    for key, value in extra.items():
        if key == "options":
            data["providers"]["sagemaker"].update(value)
        else:
            data[key] = value
    return job_from_dict(data)


def render(j):
    envelope = json.loads(plugins.get_provider("sagemaker").render(j).to_json())
    return {a["kind"]: a["content"] for a in envelope["artifacts"]}


def as_sent(request):
    """The rendered request with submit's values in place of the placeholders."""
    text = json.dumps(request).replace("<spec-hash>", "0123456789ab").replace("<code-digest>", "f" * 64)
    return json.loads(text)


@pytest.mark.parametrize("kind,nodes,procs,ps", DISTRIBUTIONS)
def test_every_distribution_renders_a_valid_request(kind, nodes, procs, ps):
    dist = {"type": kind, "nodes": nodes, "procs_per_node": procs, **({"ps": ps} if ps else {})}
    out = render(job(distribution=dist))
    request = out["sagemaker/CreateTrainingJob"]
    validate_request("sagemaker", "CreateTrainingJob", request, strict=False)  # as rendered (placeholders)
    validate_request("sagemaker", "CreateTrainingJob", as_sent(request))  # as sent: lengths, patterns, enums
    validate_request("s3", "PutObject", out["s3/PutObject"])
    spec = request["AlgorithmSpecification"]
    assert spec["ContainerEntrypoint"][:2] == ["/bin/sh", "-c"]
    args = spec["ContainerArguments"]
    # the node prelude, then the shipped launcher with the job's launch settings and command
    assert args[:3] == ["python3", "-m", "cloudtrain_aws.node"]
    launch = args[args.index("--") + 1:]
    assert launch[:5] == ["python3", "-m", "cloudtrain.launch", "--platform", "sagemaker"]
    assert launch[launch.index("--type") + 1] == kind and launch[-4:] == ["python", "train.py", "--epochs", "3"]
    assert ("--sshd" in args) == (kind in ("mpi", "horovod") and nodes > 1)
    if kind == "ps-worker":
        assert launch[launch.index("--ps") + 1] == "1"
    assert request["ResourceConfig"] == {"InstanceType": "ml.m5.xlarge", "InstanceCount": nodes, "VolumeSizeInGB": 30}
    env = request["Environment"]
    assert env["CLOUDTRAIN_DETECTORS"] == "sagemaker=cloudtrain_aws.detect:detect_sagemaker"
    assert env["OMP_NUM_THREADS"] == "1"
    # the prelude's sshd forks before it binds port 22 (OpenSSH sshd.c: daemon() before
    # server_listen()), so node 0 waits for every node's sshd before mpirun
    assert env.get("CLOUDTRAIN_WAIT_SSH") == ("22" if "--sshd" in args else None)


def test_the_boot_line_unpacks_the_code_channel_and_execs_the_launcher():
    request = render(job())["sagemaker/CreateTrainingJob"]
    entry = request["AlgorithmSpecification"]["ContainerEntrypoint"]
    assert len(entry[2]) <= 256 and entry[3] == "cloudtrain"
    assert "/opt/ml/input/data/code}/code.tar.gz" in entry[2] and entry[2].endswith('exec "$@"')
    code = request["InputDataConfig"][0]
    assert code["ChannelName"] == "code"
    assert code["DataSource"]["S3DataSource"]["S3Uri"] == "s3://ct-bucket/runs/cloudtrain-code/<code-digest>/code.tar.gz"
    upload = render(job())["s3/PutObject"]
    assert (upload["Bucket"], upload["Key"]) == ("ct-bucket", "runs/cloudtrain-code/<code-digest>/code.tar.gz")


def test_options_map_to_their_fields():
    request = render(job(max_restarts=3, options={
        "instance_type": "ml.p4d.24xlarge", "volume_gb": 200, "max_runtime_seconds": 7200, "spot": True,
        "subnets": ["subnet-1"], "security_group_ids": ["sg-1"], "network_isolation": True,
        "encrypt_inter_node_traffic": True, "keep_alive_seconds": 600, "inputs": {"train": "s3://data/train"},
        "tags": {"team": "vision"}, "code_s3": "s3://code-bucket/c"}))["sagemaker/CreateTrainingJob"]
    validate_request("sagemaker", "CreateTrainingJob", as_sent(request))
    assert request["ResourceConfig"] == {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 200,
                                         "KeepAlivePeriodInSeconds": 600}
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 14400}
    assert request["EnableManagedSpotTraining"] is True
    # per spec: two specs named alike never resume from each other's checkpoints
    assert request["CheckpointConfig"] == {"S3Uri": "s3://ct-bucket/runs/sm-job/<spec-hash>/checkpoints",
                                           "LocalPath": "/opt/ml/checkpoints"}
    assert request["Environment"]["CLOUDTRAIN_CHECKPOINT_DIR"] == "/opt/ml/checkpoints"
    assert request["RetryStrategy"] == {"MaximumRetryAttempts": 3}
    assert request["VpcConfig"] == {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]}
    assert request["EnableNetworkIsolation"] is True and request["EnableInterContainerTrafficEncryption"] is True
    assert [c["ChannelName"] for c in request["InputDataConfig"]] == ["code", "train"]
    assert request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"].startswith("s3://code-bucket/c/")
    assert {"Key": "team", "Value": "vision"} in request["Tags"]
    assert {"Key": "cloudtrain:spec-hash", "Value": "<spec-hash>"} in request["Tags"]
    plain = render(job())["sagemaker/CreateTrainingJob"]
    for absent in ("RetryStrategy", "CheckpointConfig", "VpcConfig", "EnableManagedSpotTraining",
                   "EnableNetworkIsolation"):
        assert absent not in plain


def test_instance_type_from_the_neutral_hint_and_rdma_on_gives_the_efa_presets():
    request = render(job(resources={"instance_type": "p5.48xlarge", "gpus_per_node": 8}, network={"rdma": "on"},
                         distribution={"type": "ddp", "nodes": 2}))["sagemaker/CreateTrainingJob"]
    assert request["ResourceConfig"]["InstanceType"] == "ml.p5.48xlarge"
    assert request["Environment"]["FI_PROVIDER"] == "efa" and request["Environment"]["RDMAV_FORK_SAFE"] == "1"
    launch = request["AlgorithmSpecification"]["ContainerArguments"]
    assert launch[launch.index("--nproc-per-node") + 1] == "8"
    assert request["Environment"]["FI_EFA_USE_DEVICE_RDMA"] == "1"  # the catalog: p5's EFA does RDMA read
    auto = render(job(resources={"instance_type": "ml.p4d.24xlarge"}))["sagemaker/CreateTrainingJob"]
    assert auto["Environment"]["FI_PROVIDER"] == "efa"  # auto: the catalog's row has EFA (pure render)
    g5 = render(job(resources={"accelerator": "A10G", "gpus_per_node": 8}))["sagemaker/CreateTrainingJob"]
    assert g5["ResourceConfig"]["InstanceType"] == "ml.g5.48xlarge" and g5["Environment"]["FI_PROVIDER"] == "efa"
    assert "FI_EFA_USE_DEVICE_RDMA" not in g5["Environment"]  # g5's EFA has no RDMA read: libfabric would abort
    newer = render(job(options={"instance_type": "ml.p7.48xlarge"}))["sagemaker/CreateTrainingJob"]
    assert newer["ResourceConfig"]["InstanceType"] == "ml.p7.48xlarge"  # newer than the catalog: sent as named
    assert "FI_PROVIDER" not in newer["Environment"]  # and its EFA is looked up in EC2 at submit


def test_efa_types_get_nccl_proto_simple_unless_the_job_sets_it():
    """Issue 40: EFA delivers data out of order, which NCCL's LL/LL128 protocols cannot take (aws/aws-ofi-nccl
    issue #76); SageMaker's own launchers set NCCL_PROTO=simple on EFA: sagemaker-training-toolkit PR #196,
    and aws/sagemaker-python-sdk container_drivers/distributed_drivers/torchrun_driver.py setup_env()."""
    efa = render(job(resources={"instance_type": "ml.p4d.24xlarge"}))["sagemaker/CreateTrainingJob"]
    assert efa["Environment"]["NCCL_PROTO"] == "simple"
    own = render(job(resources={"instance_type": "ml.p4d.24xlarge"},
                     env={"NCCL_PROTO": "LL128"}))["sagemaker/CreateTrainingJob"]
    assert own["Environment"]["NCCL_PROTO"] == "LL128"  # the user's setting wins
    plain = render(job(resources={"accelerator": "A10G", "gpus_per_node": 1}))["sagemaker/CreateTrainingJob"]
    assert "NCCL_PROTO" not in plain["Environment"]  # ml.g5.xlarge: no EFA, NCCL's protocols stay its own


def test_auto_gives_the_efa_presets_only_where_sagemakers_own_drivers_treat_the_type_as_efa():
    """aws/sagemaker-python-sdk, sagemaker-train/.../container_drivers/common/utils.py: SM_EFA_NCCL_INSTANCES
    (the types its torchrun/MPI drivers set FI_PROVIDER=efa for) lists ml.g5.48xlarge, not ml.g5.12xlarge,
    though EC2 gives g5.12xlarge one EFA device.  Types with RDMA-read EFA (p5e, newer than the SDK's
    list) count too; network.rdma: on asks for EFA wherever the type has it."""
    def env(**extra):
        return render(job(**extra))["sagemaker/CreateTrainingJob"]["Environment"]
    assert "FI_PROVIDER" not in env(resources={"accelerator": "A10G", "gpus_per_node": 4})  # ml.g5.12xlarge
    assert env(resources={"accelerator": "A10G", "gpus_per_node": 4}, network={"rdma": "on"})["FI_PROVIDER"] == "efa"
    assert env(options={"instance_type": "ml.g4dn.12xlarge"})["FI_PROVIDER"] == "efa"  # on the SDK's list
    assert env(options={"instance_type": "ml.p5e.48xlarge"})["FI_PROVIDER"] == "efa"  # RDMA-read EFA
    assert "FI_PROVIDER" not in env(options={"instance_type": "ml.g6e.48xlarge"})  # 4 EFA devices, no RDMA read


def test_secrets_never_rendered_only_their_secrets_manager_ids(monkeypatch):
    monkeypatch.setenv("CT_SM_TOKEN", "value-that-must-not-show")
    j = job(secrets={"HF_TOKEN": {"from_env": "CT_SM_TOKEN"}},
            options={"secrets_manager": {"HF_TOKEN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:hf"}})
    rendered = plugins.get_provider("sagemaker").render(j)
    text = rendered.to_json()
    assert "value-that-must-not-show" not in text
    out = {a.kind: a.content for a in rendered.artifacts}
    env = out["sagemaker/CreateTrainingJob"]["Environment"]
    assert "HF_TOKEN" not in env
    assert json.loads(env["CLOUDTRAIN_SECRET_IDS"]) == {
        "HF_TOKEN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:hf"}
    assert "HF_TOKEN" in env["CLOUDTRAIN_ENV_NAMES"].split(",")  # mpirun forwards it once the launcher has it
    assert out["secretsmanager/GetSecretValue"] == {"HF_TOKEN": {"SecretId": "arn:aws:secretsmanager:eu-west-1:"
                                                                             "123456789012:secret:hf",
                                                                 "SecretString": "***"}}


@pytest.mark.parametrize("options,extra,field", [
    ({"subnets": ["subnet-1"]}, {}, "providers.sagemaker.subnets"),
    ({"spot": True, "max_runtime_seconds": 3600, "max_wait_seconds": 60}, {}, "providers.sagemaker.max_wait_seconds"),
    ({"secrets_manager": {"NOPE": "x"}}, {}, "providers.sagemaker.secrets_manager"),
    ({"inputs": {"code": "s3://b/x"}}, {}, "providers.sagemaker.inputs.code"),
    ({}, {"max_restarts": 31}, "max_restarts"),
    ({}, {"resources": {"gpus_per_node": 3}}, "resources.gpus_per_node"),  # no default type has 3 GPUs
    ({"instance_type": "ml.g5.12xlarge"}, {"resources": {"gpus_per_node": 8}}, "providers.sagemaker.instance_type"),
    ({}, {"resources": {"gpus_per_node": 2, "accelerator": "a100"}}, "resources.gpus_per_node"),
    ({"instance_type": "ml.g5.xlarge"}, {"resources": {"gpus_per_node": 1}, "network": {"rdma": "on"}}, "network.rdma"),
    ({}, {"resources": {"gpus_per_node": 8, "accelerator": "TPUv5"}}, "resources.accelerator"),
    ({}, {"command": "python train.py --config " + "x" * 300}, "command"),
])
def test_bad_options_are_refused_at_their_line(tmp_path, options, extra, field):
    import yaml
    data = {"name": "bad", "command": "python t.py", "image": "img", "providers": {"sagemaker": options}, **extra}
    path = write_job(tmp_path, yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(JobFileError) as info:
        plugins.get_provider("sagemaker").render(load_job(path))
    assert str(info.value).startswith(f"{path}:"), str(info.value)
    assert f" {field}: " in str(info.value)
    assert info.value.exit_code == 2


def test_accelerator_and_count_resolve_to_the_smallest_fitting_instance():
    def kind(**resources):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an accelerator named: no warning
            out = render(job(resources=resources, network={"rdma": resources.pop("rdma", "auto")}))
        return out["sagemaker/CreateTrainingJob"]["ResourceConfig"]["InstanceType"]
    # SageMaker's ml.* training types from the catalog (EC2 DescribeInstanceTypes facts)
    assert kind(accelerator="A100", gpus_per_node=8) == "ml.p4d.24xlarge"
    assert kind(accelerator="a100-80gb", gpus_per_node=8) == "ml.p4de.24xlarge"
    assert kind(accelerator="H100", gpus_per_node=8) == "ml.p5.48xlarge"
    assert kind(accelerator="H100", gpus_per_node=1) == "ml.p5.4xlarge"
    assert kind(accelerator="A10G", gpus_per_node=1) == "ml.g5.xlarge"  # 4 vCPUs: the smallest
    assert kind(accelerator="A10G", gpus_per_node=1, cpus_per_node=16) == "ml.g5.4xlarge"
    assert kind(accelerator="A10G", gpus_per_node=1, memory_gb=200) == "ml.g5.16xlarge"
    assert kind(accelerator="A10G", gpus_per_node=1, rdma="on") == "ml.g5.8xlarge"  # the smallest g5 with EFA


def test_gpus_without_an_accelerator_pick_the_default_and_say_so_once():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = render(job(resources={"gpus_per_node": 4}))
    assert out["sagemaker/CreateTrainingJob"]["ResourceConfig"]["InstanceType"] == "ml.g5.12xlarge"
    said = [str(w.message) for w in seen if issubclass(w.category, CloudtrainWarning)]
    assert len(said) == 1 and "ml.g5.12xlarge (A10G x 4" in said[0] and "resources.accelerator" in said[0]


def test_no_image_is_bad_input():
    with pytest.raises(BadInput, match="needs a training image"):
        plugins.get_provider("sagemaker").render(job(image=None))


def test_render_json_through_the_cli_validates():
    proc = run_cli("render", "-p", "sagemaker", EXAMPLES / "digits-ddp" / "job.yaml", "-o", "json",
                   "--set", f"providers.sagemaker.role_arn={ROLE}", "--set", "providers.sagemaker.output_s3=s3://ct-bucket/o",
                   check=0)
    envelope = json.loads(proc.stdout)
    request = next(a["content"] for a in envelope["artifacts"] if a["kind"] == "sagemaker/CreateTrainingJob")
    validate_request("sagemaker", "CreateTrainingJob", as_sent(request))
    assert request["TrainingJobName"] == "digits-ddp-<spec-hash>"


@pytest.mark.parametrize("provider,forbidden", [
    ("local", ("boto3", "botocore", "cloudtrain_aws.common", "cloudtrain_aws.sagemaker", "cloudtrain_aws.ec2",
               "cloudtrain_aws.limits")),
    ("sagemaker", ("boto3", "botocore", "cloudtrain_aws.ec2"))])
def test_render_imports_no_sdk(provider, forbidden):
    code = ("import sys, cloudtrain\n"
            f"cloudtrain.render(cloudtrain.load_job({str(EXAMPLES / 'digits-ddp' / 'job.yaml')!r}), {provider!r})\n"
            "print(sorted(sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=cli_env()).stdout
    loaded = eval(out)
    assert "cloudtrain_aws.plugin" in loaded  # the plugin registers its providers by name only
    for module in forbidden:
        assert module not in loaded, module


# -- the node's side -------------------------------------------------------------------------------
def test_detector_reads_resourceconfig_json_from_the_file(tmp_path):
    from cloudtrain_aws.detect import detect_sagemaker
    path = tmp_path / "resourceconfig.json"
    path.write_text(json.dumps({"current_host": "algo-2", "hosts": ["algo-1", "algo-2"],
                                "network_interface_name": "ethwe"}))
    topo = detect_sagemaker({"CLOUDTRAIN_SM_RESOURCECONFIG": str(path)})
    assert (topo.platform, topo.node_rank, topo.num_nodes, topo.master_addr, topo.master_port) == \
        ("sagemaker", 1, 2, "algo-1", 7777)
    assert topo.env == {"NCCL_SOCKET_IFNAME": "ethwe"} and topo.output_dir == "/opt/ml/model"
    assert detect_sagemaker({"CLOUDTRAIN_SM_RESOURCECONFIG": str(tmp_path / "missing.json")}) is None
    path.write_text(json.dumps({"current_host": "algo-9", "hosts": ["algo-1"]}))
    with pytest.raises(ValueError, match="algo-9"):
        detect_sagemaker({"CLOUDTRAIN_SM_RESOURCECONFIG": str(path)})


def test_detector_is_stdlib_only_and_python38():
    import ast
    from pathlib import Path
    import cloudtrain_aws.detect as d
    import cloudtrain_aws.node as n
    for module in (d, n):
        source = Path(module.__file__).read_text()
        tree = ast.parse(source, feature_version=(3, 8))
        imported = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert imported <= {"json", "os", "re", "shutil", "sys", "subprocess", "tempfile", "cloudtrain",
                            "boto3"}, imported


def test_emulated_nodes_sharing_an_address_know_their_rank():
    cls = plugins.get_provider_class("sagemaker")
    j = job(distribution={"type": "ddp", "nodes": 3, "procs_per_node": 1}, resources={"gpus_per_node": 0})
    cluster = Cluster(hosts=["127.0.0.1"] * 3, master_port=29611, output_dir="/tmp/out")
    for i in range(3):
        env = cls.environment(j, i, cluster)
        topo = cls.detect(env)
        assert (topo.node_rank, topo.num_nodes, topo.master_port, topo.output_dir) == (i, 3, 29611, "/tmp/out")
        assert json.loads(env["CLOUDTRAIN_SM_RESOURCECONFIG_JSON"])["hosts"] == ["127.0.0.1"] * 3
    default = cls.environment(j, 1)
    assert json.loads(default["CLOUDTRAIN_SM_RESOURCECONFIG_JSON"])["current_host"] == "algo-2"
    assert "CLOUDTRAIN_SM_HOST_RANK" not in default  # algo-1..3: the sorted host list ranks them
    assert cls.detect(default).node_rank == 1 and cls.detect(default).master_port == 7777


def test_emulated_nodes_get_what_a_sagemaker_instance_gives_a_container_without_the_toolkit():
    """Issue 40: cloudtrain's ContainerEntrypoint bypasses the training toolkit, so a real node has
    no SM_* variable: aws/sagemaker-python-sdk, sagemaker-train/src/sagemaker/train/container_drivers/
    scripts/environment.py set_env() derives SM_HOSTS, SM_CURRENT_HOST(_RANK), SM_MODEL_DIR,
    SM_NUM_GPUS, SM_MASTER_ADDR/PORT, SM_RESOURCE_CONFIG ... from /opt/ml/input/config/
    resourceconfig.json (and inputdataconfig.json, hyperparameters.json) inside the container, and
    reads only TRAINING_JOB_NAME from the environment SageMaker gives.  An emulated node must not
    hand a script what the platform will not."""
    cls = plugins.get_provider_class("sagemaker")
    j = job(distribution={"type": "ddp", "nodes": 2, "procs_per_node": 1}, resources={"gpus_per_node": 0})
    cluster = Cluster(hosts=["digits-0", "digits-1"], master_port=29611, output_dir="/tmp/out")
    for i in range(2):
        env = cls.environment(j, i, cluster)
        assert not [k for k in env if k.startswith("SM_")], env
        assert env["TRAINING_JOB_NAME"] == "sm-job"
        config = json.loads(env["CLOUDTRAIN_SM_RESOURCECONFIG_JSON"])  # resourceconfig.json's content
        assert (config["current_host"], config["hosts"]) == (f"digits-{i}", ["digits-0", "digits-1"])
        assert config["current_instance_type"] == "ml.m5.xlarge"
        topo = cls.detect(env)
        assert (topo.platform, topo.node_rank, topo.num_nodes, topo.master_addr, topo.master_port) == \
            ("sagemaker", i, 2, "digits-0", 29611)
        assert topo.output_dir == "/tmp/out" and topo.nproc_per_node is None  # no SM_NUM_GPUS: the launcher's flag


def test_map_state_reads_the_secondary_status():
    cls = plugins.get_provider_class("sagemaker")
    from cloudtrain.providers.provider import State
    assert cls.map_state("InProgress/Starting") is State.STARTING
    assert cls.map_state("InProgress/Downloading") is State.STARTING
    assert cls.map_state("InProgress/Training") is State.RUNNING
    assert cls.map_state("Completed/Completed") is State.SUCCEEDED
    assert cls.map_state("Failed/Failed") is State.FAILED
    assert cls.map_state("Stopped/Stopped") is State.CANCELLED
    assert cls.map_state("Stopped/MaxRuntimeExceeded") is State.FAILED
    assert cls.map_state("InProgress/SomethingNew") is State.RUNNING
    assert cls.map_state("Brand-new") is State.UNKNOWN
    assert re.match(r"^[a-z]", cls.description.lower())
