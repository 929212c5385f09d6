"""issue 30 item 4 on ModelArts Standard: a job that asks for no accelerator and names no flavor_id or
pool_id gets its flavor at submit, the region's smallest CPU training flavor with the job's
cpus_per_node and memory_gb, read through the real ``huaweicloudsdkmodelarts`` client
(ShowTrainingJobFlavors, flavor_type CPU) from modelarts_double.py; the render shows a placeholder
(the spec hash stays the same), validate no longer asks for flavor_id, and a job no flavor fits is
exit 2 before anything is created."""
from __future__ import annotations

import json

import pytest
from huaweicloudsdkmodelarts import v1

from cloudtrain.extend.plugins import get_provider
from cloudtrain.input.loading import load_job
from cloudtrain.spec.errors import CloudtrainWarning, JobFileError
from cloudtrain.transfer import objectstore
from conftest import EXAMPLES, run_cli, write_job
from doubles.modelarts_double import AK, PROJECT, SK, FakeModelArts
from doubles.obs_double import ObsDouble

CODE_BUCKET = "bkt"
REGION_ENV = "HUAWEICLOUD_SDK_REGION_MODELARTS_CN_NORTH_4"
OBS_ENV = "HUAWEICLOUD_SDK_REGION_OBS_CN_NORTH_4"


def cpu(flavor_id: str, cores: int, memory: int, max_num: int = 10, unit: str = "GB") -> dict:
    """A CPU flavor as the SDK's FlavorResponse model holds it (flavor_info: FlavorInfoResponse)."""
    return {"flavor_id": flavor_id, "flavor_name": f"CPU: {cores} vCPUs {memory}{unit}", "max_num": max_num,
            "flavor_type": "CPU", "billing": {"code": "modelarts.vm.cpu", "unit_num": 1},
            "flavor_info": {"max_num": max_num, "cpu": {"arch": "x86", "core_num": cores},
                            "memory": {"size": memory, "unit": unit}}}


FLAVORS = [
    cpu("modelarts.vm.cpu.16u", 16, 64),
    cpu("modelarts.vm.cpu.8u.b", 8, 32),       # ties with .8u: the name decides
    cpu("modelarts.vm.cpu.8u", 8, 32),
    cpu("modelarts.vm.cpu.8a", 8, 32, max_num=1),  # one node only: not for a 2-node job
    cpu("modelarts.vm.cpu.4u", 4, 16384, unit="MB"),  # 16 GB
    cpu("modelarts.vm.cpu.2u", 2, 8),
    {"flavor_id": "modelarts.p3.large.public", "flavor_name": "GPU: 1*NVIDIA-V100(32GB)", "max_num": 10,
     "flavor_type": "GPU", "flavor_info": {"max_num": 10, "cpu": {"arch": "x86", "core_num": 8},
                                           "memory": {"size": 64, "unit": "GB"},
                                           "gpu": {"unit_num": 1, "product_name": "NVIDIA-V100", "memory": "32GB"}}},
]


def test_the_flavor_list_is_read_by_type_as_the_sdk_models_it():
    """The fact submit relies on: ShowTrainingJobFlavorsRequest takes flavor_type, sent as the query
    parameter flavor_type (values CPU, GPU, Ascend), and every FlavorResponse above fits the SDK's
    model (no field it does not have)."""
    assert v1.ShowTrainingJobFlavorsRequest.attribute_map == {"flavor_type": "flavor_type"}
    doc = v1.ShowTrainingJobFlavorsRequest.__init__.__doc__
    assert all(value in doc for value in ("CPU", "GPU", "Ascend"))
    for flavor in FLAVORS:
        assert set(flavor) <= set(v1.FlavorResponse.attribute_map.values())
        assert set(flavor["flavor_info"]) <= set(v1.FlavorInfoResponse.attribute_map.values())
    from cloudtrain_modelarts import catalog
    assert [str(f) for f in map(catalog.cpu_flavor_of, FLAVORS[3:6])] == [
        "modelarts.vm.cpu.8a (8 vCPUs, 32 GB, at most 1 node(s))",
        "modelarts.vm.cpu.4u (4 vCPUs, 16 GB, at most 10 node(s))",
        "modelarts.vm.cpu.2u (2 vCPUs, 8 GB, at most 10 node(s))"]


@pytest.fixture(scope="module")
def obs_server():
    with ObsDouble(AK, SK) as server:
        yield server


@pytest.fixture
def env(obs_server, tmp_path):
    obs_server.reset()
    objectstore.forget_uploads()
    obs_server.create_bucket(CODE_BUCKET)
    with FakeModelArts() as fake:
        fake.flavors = FLAVORS
        yield fake, {"HOME": str(tmp_path), "HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK,
                     "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT, "HUAWEICLOUD_SDK_REGION": "cn-north-4",
                     REGION_ENV: fake.url, OBS_ENV: obs_server.endpoint, "CLOUDTRAIN_HOME": str(tmp_path / "ct"),
                     "CLOUDTRAIN_CONFIG": ""}


def job_file(tmp_path, resources: str, nodes: int = 2, options: str = ""):
    return write_job(tmp_path, f"""
        name: ma-cpu
        code: {EXAMPLES / "digits-ddp"}
        command: python train.py --epochs 1
        image: swr.cn-north-4.myhuaweicloud.com/team/pytorch:2.1
        distribution: {{type: ddp, nodes: {nodes}, procs_per_node: 1}}
        resources: {resources}
        providers:
          modelarts:
            region: cn-north-4
            code_store: obs://{CODE_BUCKET}/team
            {options}
        """)


def created(fake):
    return [b for m, p, b in fake.requests if m == "POST" and p.endswith("/training-jobs")]


@pytest.mark.parametrize("resources, nodes, chosen, line", [
    ("{cpus_per_node: 8, memory_gb: 32}", 2, "modelarts.vm.cpu.8u",
     "modelarts.vm.cpu.8u (8 vCPUs, 32 GB) for 8 vCPUs / 32 GB"),
    ("{cpus_per_node: 8, memory_gb: 32}", 1, "modelarts.vm.cpu.8a",
     "modelarts.vm.cpu.8a (8 vCPUs, 32 GB) for 8 vCPUs / 32 GB"),
    ("{memory_gb: 12}", 2, "modelarts.vm.cpu.4u", "modelarts.vm.cpu.4u (4 vCPUs, 16 GB) for 12 GB"),
    ("{}", 2, "modelarts.vm.cpu.2u", "modelarts.vm.cpu.2u (2 vCPUs, 8 GB) for any size"),
])
def test_a_cpu_job_without_flavor_id_is_created_with_the_smallest_fitting_cpu_flavor(
        tmp_path, env, monkeypatch, capsys, resources, nodes, chosen, line):
    fake, variables = env
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    provider = get_provider("modelarts")
    path = job_file(tmp_path, resources, nodes)
    with pytest.warns(CloudtrainWarning, match="flavor_id is not set and the job asks for no accelerator"):
        rendered, again = provider.render(load_job(path)), provider.render(load_job(path))
    shown = rendered.artifacts[-1].content["spec"]["resource"]["flavor_id"]
    assert shown.startswith("<chosen at submit: the smallest CPU flavor") and chosen not in json.dumps(
        rendered.artifacts[-1].content)
    assert provider.spec_hash(rendered) == provider.spec_hash(again)
    capsys.readouterr()
    run = provider.submit(rendered)
    (body,) = created(fake)
    assert body["spec"]["resource"] == {"node_count": nodes, "flavor_id": chosen}
    assert f"cloudtrain: modelarts: flavor {line}\n" in capsys.readouterr().err
    assert ("GET", f"/v2/{PROJECT}/training-job-flavors") in fake.calls
    job_id = run.handle.split("/")[-1]
    assert fake.jobs[job_id]["spec"]["resource"]["flavor_id"] == chosen
    assert provider.submit(rendered).handle == run.handle and len(created(fake)) == 1  # the same spec: found


def test_a_cpu_job_no_flavor_fits_is_exit_2_before_any_create_naming_what_the_region_offers(tmp_path, env):
    fake, variables = env
    path = job_file(tmp_path, "{cpus_per_node: 32, memory_gb: 64}")
    proc = run_cli("submit", path, "-p", "modelarts", "--detach", env=variables)
    assert proc.returncode == 2, proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("cloudtrain: error:")]
    assert len(errors) == 1 and errors[0].startswith(f"cloudtrain: error: {path}:")
    assert "resources.cpus_per_node" in errors[0] and "32 vCPUs / 64 GB" in errors[0]
    assert "modelarts.vm.cpu.16u (16 vCPUs, 64 GB" in errors[0] and "modelarts.vm.cpu.2u (2 vCPUs, 8 GB" in errors[0]
    assert "modelarts.p3.large.public" not in errors[0]  # a GPU flavor is not offered to a CPU job
    assert fake.count("GET", r"/training-job-flavors$") == 1
    assert created(fake) == [] and fake.count("POST", r"/training-jobs$") == 0

    fake.flavors = FLAVORS[-1:]  # a region that lists no CPU flavor: exit 3, the way out named
    proc = run_cli("submit", job_file(tmp_path / "b", "{}"), "-p", "modelarts", "--detach", env=variables)
    assert proc.returncode == 3, proc.stderr
    assert "no CPU training flavor in cn-north-4" in proc.stderr and "flavor_id" in proc.stderr
    assert created(fake) == []


def test_validate_of_a_cpu_job_without_flavor_id_passes_its_flavor_check(tmp_path):
    """Offline: no flavor_id is needed for a job with no accelerator; a GPU job the catalog has no
    flavor for still needs one."""
    path = job_file(tmp_path, "{cpus_per_node: 4}")
    proc = run_cli("validate", path, "-p", "modelarts", env={"CLOUDTRAIN_CONFIG": ""})
    assert proc.returncode == 0, proc.stderr
    assert "flavor_id: is not set" not in proc.stderr
    assert "flavor_id is not set and the job asks for no accelerator: submit takes" in proc.stderr
    rendered = run_cli("render", path, "-p", "modelarts", "-o", "json", env={"CLOUDTRAIN_CONFIG": ""}, check=0)
    assert "<chosen at submit: the smallest CPU flavor with >= 4 vCPUs>" in rendered.stdout
    assert "submit takes the smallest CPU flavor with >= 4 vCPUs the region lists" in rendered.stderr
    gpu = job_file(tmp_path / "gpu", "{accelerator: A100, gpus_per_node: 8}")
    proc = run_cli("validate", gpu, "-p", "modelarts", env={"CLOUDTRAIN_CONFIG": ""})
    assert proc.returncode == 2 and "flavor_id" in proc.stderr
    with pytest.raises(JobFileError):
        get_provider("modelarts").render(load_job(gpu), submit=True)
