"""The tione provider's render: CreateTrainingTask as the SDK's request model takes it.

Every rendered request is loaded into ``models.CreateTrainingTaskRequest`` with the SDK's
unknown-field warning ("<Key> fileds are useless.") turned into an error, and must serialize
back to the same dict (so nested lists and objects have the model's shape).
"""
import base64
import json
import shlex
import warnings

import pytest

from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import job_from_dict, load_job
from cloudtrain.extend.plugins import get_provider
from conftest import EXAMPLES, run_cli, write_job
from tencentcloud.tione.v20211111 import models

from cloudtrain_tione.detect import NCCL_PRESET
from cloudtrain_tione.render import decode_start_commands

BASE = {"name": "tj", "command": "python train.py --epochs 2", "image": "ccr.ccs.tencentyun.com/team/train:1",
        "distribution": {"type": "ddp", "nodes": 2, "procs_per_node": 2},
        "env": {"OMP_NUM_THREADS": "1"}, "secrets": {"HF_TOKEN": {"from_env": "CT_TIONE_SECRET"}},
        "providers": {"tione": {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST",
                                "code_source": "cos://train-1250000000/code/tj/"}}}


def job(**overrides):
    data = json.loads(json.dumps(BASE))
    tione = overrides.pop("tione", None)
    data.update(overrides)
    if tione is not None:
        data["providers"]["tione"].update(tione)
    return job_from_dict(data)


def render(**overrides):
    rendered = get_provider("tione").render(job(**overrides))
    assert [a.kind for a in rendered.artifacts] == ["tione/CreateTrainingTask"]
    content = rendered.artifacts[0].content
    model_load(content)
    return content


def model_load(content: dict):
    """The SDK model takes the request: no unknown field anywhere, and it serializes back unchanged."""
    req = models.CreateTrainingTaskRequest()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        req._deserialize(json.loads(json.dumps(content)))
    assert json.loads(json.dumps(req._serialize(allow_none=False))) == content
    return req


def envs(content):
    return {e["Name"]: e for e in content["Envs"]}


def test_the_model_check_catches_a_typo():
    with pytest.raises(UserWarning, match="fileds are useless"):
        model_load({"Name": "x", "ResourceConfigInfos": [{"Role": "WORKER", "InstanceNumber": 2}]})


def test_ddp_request(monkeypatch):
    monkeypatch.setenv("CT_TIONE_SECRET", "s3cr3t-tione-value")
    c = render()
    assert c["Name"] == "tj-<spec-hash>" and c["ChargeType"] == "POSTPAID_BY_HOUR"
    assert c["TrainingMode"] == "DDP"
    assert c["ResourceConfigInfos"] == [{"Role": "WORKER", "InstanceType": "TI.S.LARGE.POST", "InstanceNum": 2}]
    assert c["ImageInfo"] == {"ImageType": "CCR", "ImageUrl": "ccr.ccs.tencentyun.com/team/train:1"}
    line = c["StartCmdInfo"]["StartCmd"]
    assert line.startswith("cd /opt/ml/code && PYTHONPATH=/opt/ml/code/.cloudtrain${PYTHONPATH:+:$PYTHONPATH} ")
    assert shlex.split(line.split(" ", 4)[4]) == [
        "python3", "-m", "cloudtrain.launch", "--platform", "tione", "--type", "ddp", "--nproc-per-node", "2",
        "--", "python", "train.py", "--epochs", "2"]
    assert "EncodedStartCmdInfo" not in c
    assert c["DataSource"] == "COS"
    assert c["DataConfigs"] == [{"MappingPath": "/opt/ml/code", "DataSourceUsage": "USER_CODE", "DataSourceType": "COS",
                                 "COSSource": {"Bucket": "train-1250000000", "Region": "ap-shanghai",
                                               "Paths": ["code/tj/"]}}]
    e = envs(c)
    assert e["OMP_NUM_THREADS"]["Value"] == "1"
    assert e["HF_TOKEN"] == {"Name": "HF_TOKEN", "Value": "***", "IsPrivate": True}
    assert e["CLOUDTRAIN_DETECTORS"]["Value"] == "tione=cloudtrain_tione.detect:detect"
    assert e["CLOUDTRAIN_OUTPUT_DIR"]["Value"] == "/opt/ml/model"
    assert e["CLOUDTRAIN_ENV_NAMES"]["Value"] == "HF_TOKEN,OMP_NUM_THREADS"
    assert "CLOUDTRAIN_MASTER_PORT" not in e  # DDP mode has MASTER_PORT
    tags = {t["TagKey"]: t["TagValue"] for t in c["Tags"]}
    assert tags == {"managed-by": "cloudtrain", "cloudtrain-job": "tj", "cloudtrain-spec": "<spec-hash>"}
    assert "s3cr3t-tione-value" not in json.dumps(c)


@pytest.mark.parametrize("kind,mode", [("mpi", "MPI"), ("horovod", "HOROVOD"), ("deepspeed", "DDP"), ("none", "DDP")])
def test_modes(kind, mode):
    c = render(distribution={"type": kind, "nodes": 3, "procs_per_node": 2})
    assert c["TrainingMode"] == mode
    assert c["ResourceConfigInfos"][0]["InstanceNum"] == 3 and len(c["ResourceConfigInfos"]) == 1
    assert f"--type {kind} --nproc-per-node 2 -- python train.py" in c["StartCmdInfo"]["StartCmd"]
    assert ("CLOUDTRAIN_MASTER_PORT" in envs(c)) == (mode in ("MPI", "HOROVOD"))


def test_ps_worker_has_ps_and_worker_commands():
    c = render(distribution={"type": "ps-worker", "nodes": 5, "ps": 2})
    assert c["TrainingMode"] == "PS_WORKER"
    assert [(r["Role"], r["InstanceNum"]) for r in c["ResourceConfigInfos"]] == [("PS", 2), ("WORKER", 3)]
    cmds = c["StartCmdInfo"]
    assert cmds["StartCmd"] == ""
    assert cmds["PsStartCmd"] == cmds["WorkerStartCmd"]
    assert "--type ps-worker --nproc-per-node 1 --ps 2 -- python train.py" in cmds["PsStartCmd"]
    assert envs(c)["CLOUDTRAIN_MASTER_PORT"]["Value"] == "29500"


def test_ray_head_and_workers_and_the_head_only_command():
    c = render(distribution={"type": "ray", "nodes": 3}, command="python job.py")
    assert c["TrainingMode"] == "RAY"
    assert [(r["Role"], r["InstanceNum"]) for r in c["ResourceConfigInfos"]] == [("HEAD", 1), ("WORKER", 2)]
    # TI-ONE starts Ray and runs the command on the head: the launcher must not start Ray again
    assert "--type none --nproc-per-node 1 -- python job.py" in c["StartCmdInfo"]["StartCmd"]
    # Issue 21 #4: seed 000's Ray table (lines 75-78) gives HEAD_ADDR, HEAD_PORT and RANK only --
    # no node count -- so the request tells every node how many there are
    assert envs(c)["CLOUDTRAIN_TIONE_NODES"]["Value"] == "3"
    assert "CLOUDTRAIN_TIONE_NODES" not in envs(render())
    assert render(distribution={"type": "ray", "nodes": 1})["ResourceConfigInfos"] == [
        {"Role": "HEAD", "InstanceType": "TI.S.LARGE.POST", "InstanceNum": 1}]


def test_a_command_with_quotes_is_encoded():
    c = render(command="python train.py --note 'two words' --tag \"x\"")
    assert "StartCmdInfo" not in c
    raw = base64.b64decode(c["EncodedStartCmdInfo"]["StartCmdInfo"])
    full = json.loads(raw)
    assert set(full) == {"StartCmd", "PsStartCmd", "WorkerStartCmd"}  # TI-ONE wants all three keys
    assert full["PsStartCmd"] == full["WorkerStartCmd"] == ""
    argv = shlex.split(full["StartCmd"].split(" ", 4)[4])
    assert argv[argv.index("--") + 1:] == ["python", "train.py", "--note", "two words", "--tag", "x"]
    assert decode_start_commands(c) == full


def test_ps_worker_encoded_keeps_both_role_commands():
    c = render(distribution={"type": "ps-worker", "nodes": 3}, command=["python", "train.py", "--msg", "a b"])
    full = decode_start_commands(c)
    assert full["StartCmd"] == "" and full["PsStartCmd"] == full["WorkerStartCmd"]
    assert "'a b'" in full["PsStartCmd"]


def test_resource_group_units():
    c = render(resources={"cpus_per_node": 7.5, "memory_gb": 30, "gpus_per_node": 1},
               tione={"instance_type": None, "resource_group": "trsg-abc", "gpu_type": "A10", "gpus": 0.5})
    assert c["ChargeType"] == "PREPAID" and c["ResourceGroupId"] == "trsg-abc"
    assert c["ResourceConfigInfos"] == [{"Role": "WORKER", "Cpu": 7500, "Memory": 30720, "Gpu": 50,
                                         "GpuType": "A10", "InstanceNum": 2}]


def test_storage_mounts_and_output():
    c = render(tione={"code_source": "cfs://cfs-1a2b/teams/tj/code",
                      "data": [{"source": "goosefsx://gfsx-9/data", "path": "/opt/ml/input/data"},
                               {"source": "dataset://ds-42", "path": "/opt/ml/input/ds", "read_only": False},
                               {"source": "cfsturbo://ct-1/x", "path": "/x"}],
                      "output": "cos://out-125/runs/tj/", "project": "proj-7", "vpc_id": "vpc-1",
                      "subnet_id": "subnet-1", "cls": {"logset_id": "ls-1", "topic_id": "tp-1"},
                      "tags": {"team": "ml"}, "remark": "nightly"})
    assert c["DataSource"] == "CFS" and c["TiProjectId"] == "proj-7"
    assert c["DataConfigs"] == [
        {"MappingPath": "/opt/ml/code", "DataSourceUsage": "USER_CODE", "DataSourceType": "CFS",
         "CFSSource": {"Id": "cfs-1a2b", "Path": "/teams/tj/code"}},
        {"MappingPath": "/opt/ml/input/data", "DataSourceUsage": "USER_DATA", "DataSourceType": "GooseFSx",
         "GooseFSSource": {"Id": "gfsx-9", "Type": "GooseFSx", "Path": "/data"}, "ReadOnly": True},
        {"MappingPath": "/opt/ml/input/ds", "DataSourceUsage": "USER_DATA", "DataSourceType": "DATASET",
         "DataSetSource": {"Id": "ds-42"}, "ReadOnly": False},
        {"MappingPath": "/x", "DataSourceUsage": "USER_DATA", "DataSourceType": "CFSTurbo",
         "CFSTurboSource": {"Id": "ct-1", "Path": "/x"}, "ReadOnly": True}]
    assert c["Output"] == {"Bucket": "out-125", "Region": "ap-shanghai", "Paths": ["runs/tj/"]}
    assert (c["VpcId"], c["SubnetId"], c["Remark"]) == ("vpc-1", "subnet-1", "nightly")
    assert c["LogEnable"] is True and c["LogConfig"] == {"LogsetId": "ls-1", "TopicId": "tp-1"}
    assert {"TagKey": "team", "TagValue": "ml"} in c["Tags"]
    cfs_out = render(tione={"output": "cfs://cfs-1/out", "output_dir": "/out"})
    assert cfs_out["DataConfigs"][-1] == {"MappingPath": "/out", "DataSourceUsage": "OUTPUT", "DataSourceType": "CFS",
                                          "CFSSource": {"Id": "cfs-1", "Path": "/out"}, "ReadOnly": False}
    assert envs(cfs_out)["CLOUDTRAIN_OUTPUT_DIR"]["Value"] == "/out"


def test_images_by_registry():
    tcr = render(image="team.tencentcloudcr.com/ns/img:1", tione={"registry_id": "tcr-1"})
    assert tcr["ImageInfo"] == {"ImageType": "TCR", "ImageUrl": "team.tencentcloudcr.com/ns/img:1",
                                "RegistryRegion": "ap-shanghai", "RegistryId": "tcr-1"}
    assert render(image="docker.io/pytorch/pytorch:2.4")["ImageInfo"]["ImageType"] == "CUSTOM"
    preset = render(image=None, tione={"framework": {"name": "PYTORCH", "version": "1.9",
                                                      "environment": "torch1.9-py3.8-cuda11.1-gpu"}})
    assert "ImageInfo" not in preset
    assert (preset["FrameworkName"], preset["FrameworkVersion"], preset["FrameworkEnvironment"]) == (
        "PYTORCH", "1.9", "torch1.9-py3.8-cuda11.1-gpu")


def rdma_job(tmp_path, nodes: int):
    """A job file asking for RDMA on postpaid instances (network.rdma on line 5)."""
    return write_job(tmp_path, f"""
        name: big
        command: python train.py
        distribution: {{type: ddp, nodes: {nodes}}}
        resources: {{gpus_per_node: 8}}
        network: {{rdma: "on"}}
        providers:
          tione: {{instance_type: TI.HCCPNV6.96XLARGE2304.POST}}
        """)


def test_rdma_on_needs_two_nodes_by_eight_gpus(tmp_path):
    path = rdma_job(tmp_path, 1)
    with pytest.raises(JobFileError) as info:
        get_provider("tione").render(load_job(path))
    assert str(info.value).startswith(f"{path}:5: network.rdma: TI-ONE gives RDMA to jobs of at least 2 nodes")
    with pytest.raises(JobFileError, match=r"this job has 2 node\(s\) x 4 GPU\(s\)"):
        get_provider("tione").render(load_job(path, {"distribution.nodes": 2, "resources.gpus_per_node": 4}))


GROUP = {"instance_type": None, "resource_group": "rsg-hcc", "hcc": True}
# a resource group's GPUs need their GpuType (SDK ResourceConf.GpuType): the accelerator gives it
GROUP_RES = {"accelerator": "A100", "gpus_per_node": 8, "cpus_per_node": 90, "memory_gb": 900}


def test_rdma_settings(capsys):
    on = render(resources=GROUP_RES, network={"rdma": "on"}, tione=GROUP)
    assert on["ChargeType"] == "PREPAID"
    assert all(r["RDMAConfig"] == {"Enable": True} for r in on["ResourceConfigInfos"])
    assert envs(on)["CLOUDTRAIN_TIONE_RDMA"]["Value"] == "1"
    auto = render(resources=GROUP_RES, tione=GROUP)
    assert auto["ResourceConfigInfos"][0]["RDMAConfig"] == {"Enable": True}
    off = render(resources=GROUP_RES, network={"rdma": "off"}, tione=GROUP)
    assert off["ResourceConfigInfos"][0]["RDMAConfig"] == {"Enable": False}
    assert "CLOUDTRAIN_TIONE_RDMA" not in envs(off)
    small = render(resources={"gpus_per_node": 1}, tione={"instance_type": "TI.GN10.2XLARGE40.POST"})
    assert "RDMAConfig" not in small["ResourceConfigInfos"][0]
    capsys.readouterr()
    render(resources=GROUP_RES, network={"rdma": "on"}, tione=dict(GROUP, hcc=None))
    assert "nothing says the resource group's nodes are HCC machines" in capsys.readouterr().err
    render(resources=GROUP_RES, tione=dict(GROUP, hcc=None))
    assert "set providers.tione.hcc" in capsys.readouterr().err


def test_rdma_is_a_resource_group_feature(tmp_path, capsys):
    """Issue 21 #5.  Seed 000 line 94, RDMA's first prerequisite: "资源组中至少包含2台支持 RDMA 的
    高性能 GPU 节点" (a resource group with at least 2 RDMA-capable GPU nodes).  The SDK model
    (tencentcloud tione v20211111 models.py) documents ResourceConfigInfo.InstanceType's
    pay-as-you-go ("for后付费") specs as TI.S.*, TI.GN10 (V100) and TI.GN7 (T4) -- no RDMA type --
    and RDMAConfig.Enable only as "是否开启RDMA", nowhere for ChargeType POSTPAID_BY_HOUR.  So
    network.rdma: on without a resource group is refused (before: sent with a naming warning),
    and auto on postpaid sends no RDMAConfig."""
    path = rdma_job(tmp_path, 2)
    with pytest.raises(JobFileError) as info:
        get_provider("tione").render(load_job(path))
    assert str(info.value).startswith(f"{path}:5: network.rdma: TI-ONE gives RDMA to a resource group (prepaid)")
    assert "set providers.tione.resource_group" in str(info.value)
    auto = render(resources={"gpus_per_node": 8}, tione={"instance_type": "TI.HCCPNV6.96XLARGE2304.POST"})
    assert auto["ChargeType"] == "POSTPAID_BY_HOUR"
    assert all("RDMAConfig" not in r for r in auto["ResourceConfigInfos"]) and "CLOUDTRAIN_TIONE_RDMA" not in envs(auto)
    assert "RDMA is not requested" in capsys.readouterr().err
    off = render(resources={"gpus_per_node": 8}, network={"rdma": "off"},
                 tione={"instance_type": "TI.GN10.20XLARGE320.POST"})
    assert all("RDMAConfig" not in r for r in off["ResourceConfigInfos"])


def test_ray_needs_whole_cpus(tmp_path):
    path = write_job(tmp_path, """
        name: rc
        command: python job.py
        distribution: {type: ray, nodes: 2}
        resources: {cpus_per_node: 0.7, memory_gb: 4}
        providers:
          tione: {resource_group: trsg-1}
        """)
    with pytest.raises(JobFileError) as info:
        get_provider("tione").render(load_job(path))
    assert str(info.value).startswith(f"{path}:4: resources.cpus_per_node: "
                                      "Ray schedules whole CPUs and truncates 0.7 to 0")
    with pytest.raises(JobFileError, match="truncates 2.5 to 2"):
        get_provider("tione").render(load_job(path, {"resources.cpus_per_node": 2.5}))
    # the same fraction is fine outside Ray: TI-ONE takes 1/1000 cores
    c = get_provider("tione").render(load_job(path, {"distribution.type": "ddp"})).artifacts[0].content
    assert c["ResourceConfigInfos"][0]["Cpu"] == 700


def test_ray_fractional_gpus_warn(capsys):
    render(distribution={"type": "ray", "nodes": 2}, resources={"cpus_per_node": 4, "memory_gb": 16},
           tione={"instance_type": None, "resource_group": "trsg-1", "gpus": 0.2, "gpu_type": "T4"})
    assert "Ray sees a 0.2-GPU share as one whole GPU" in capsys.readouterr().err


@pytest.mark.parametrize("tione,field,message", [
    ({"code_source": "s3://bucket/x"}, "providers.tione.code_source", "is not a storage URL"),
    ({"code_source": "dataset://ds-1"}, "providers.tione.code_source", "code cannot come from a dataset"),
    ({"region": None}, "providers.tione.region", "COS paths"),
    ({"resource_group": "trsg-1"}, "providers.tione.instance_type", "not both"),
    ({"gpus": 1}, "providers.tione.gpus", "for resource groups"),
    ({"data": [{"source": f"dataset://d{i}", "path": f"/d{i}"} for i in range(10)]}, "providers.tione.data",
     "at most 10 data configs"),
])
def test_bad_options_at_their_line(tmp_path, tione, field, message):
    data = json.loads(json.dumps(BASE))
    data["providers"]["tione"].update(tione)
    import yaml
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(JobFileError) as info:
        get_provider("tione").render(load_job(path))
    text = str(info.value)
    assert text.startswith(f"{path}:") and f": {field}: " in text and message in text


def test_tcr_needs_a_registry_id():
    with pytest.raises(JobFileError, match="registry_id"):
        render(image="team.tencentcloudcr.com/ns/img:1")


def test_long_names_are_cut_to_sixty_characters(capsys):
    c = render(name="a" * 63)
    assert c["Name"] == "a" * 43 + "-<spec-hash>"
    assert len(c["Name"].replace("<spec-hash>", "0" * 16)) == 60
    assert "at most 60 characters" in capsys.readouterr().err


def test_what_a_submit_still_needs_is_a_warning(capsys):
    data = {"name": "bare", "command": "python t.py"}
    get_provider("tione").render(job_from_dict(data))
    err = capsys.readouterr().err
    # no instance_type: a job without accelerators gets the smallest CPU spec (issue 30 item 4)
    assert "to submit, also set providers.tione.code_store, image (" in err


def test_cli_render_json_for_every_example_loads_into_the_model():
    for example in ("digits-ddp", "mpi-allreduce", "ps-worker", "ray-counter", "deepspeed-digits"):
        proc = run_cli("render", "-p", "tione", EXAMPLES / example / "job.yaml", "-o", "json", check=0)
        envelope = json.loads(proc.stdout)
        assert envelope["provider"] == "tione" and envelope["artifacts"][0]["kind"] == "tione/CreateTrainingTask"
        model_load(envelope["artifacts"][0]["content"])


def test_environment_with_rdma_carries_the_nccl_preset():
    from cloudtrain_tione.provider import TioneProvider
    j = job(resources={"gpus_per_node": 8, "cpus_per_node": 90, "memory_gb": 900}, network={"rdma": "on"},
            tione={"instance_type": None, "resource_group": "rsg-hcc", "hcc": True})
    env = TioneProvider.environment(j, 1)
    assert {k: env[k] for k in NCCL_PRESET} == NCCL_PRESET
    topo = TioneProvider.detect(env)
    assert topo.env["NCCL_IB_HCA"] == "mlx5_bond" and topo.node_rank == 1


def test_validate_says_each_missing_setting_once_in_one_sentence(tmp_path):
    """Issue 30 item 8: validate printed 'warning: to submit, also set ...' and then the same settings as
    errors, and the region's hint read 'needs it to submit: or export TENCENTCLOUD_REGION: set it with'."""
    path = write_job(tmp_path, """
        name: bare
        command: python t.py
        image: ccr.ccs.tencentyun.com/a/b:1
        """)
    proc = run_cli("validate", path, "-p", "tione", env={"TENCENTCLOUD_REGION": ""})
    assert proc.returncode == 2
    assert "warning" not in proc.stderr, proc.stderr
    region = next(line for line in proc.stderr.splitlines() if "providers.tione.region" in line)
    assert ": or " not in region and "TENCENTCLOUD_REGION" in region
