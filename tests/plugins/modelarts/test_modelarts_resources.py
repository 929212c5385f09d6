"""ModelArts Standard's flavor from resources.accelerator x gpus_per_node: a dedicated pool's
modelarts.pool.visual.<n>xlarge by card count, a public flavor from catalogs/modelarts.json, and
the catalog's refresh through the SDK's show_training_job_flavors against the loopback double."""
from __future__ import annotations

import re
import warnings

import pytest
from huaweicloudsdkmodelarts.v1.model import spec_resource

from cloudtrain.catalogs import catalog
from cloudtrain.spec.errors import CloudtrainWarning, JobFileError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain_modelarts.catalog import POOL_FLAVORS
from conftest import run_cli, write_job
from doubles.modelarts_double import AK, PROJECT, SK, FakeModelArts


def test_pool_flavors_are_the_sdks():
    """Source: huaweicloudsdkmodelarts SpecResource.flavor_id docstring ("modelarts.pool.visual.8xlarge（8卡）")."""
    doc = spec_resource.SpecResource.__init__.__doc__
    documented = {int(n): f for f, n in re.findall(r"(modelarts\.pool\.visual\.\w+)（(\d+)卡", doc)}
    assert documented == POOL_FLAVORS


def job_file(tmp_path, resources: str, options: str = "{}"):
    return write_job(tmp_path, f"""
        name: ma
        command: python train.py
        image: swr.cn-north-4.myhuaweicloud.com/team/train:1
        resources: {resources}
        providers:
          modelarts: {options}
        """)


def flavor(path, **overrides):
    body = get_provider("modelarts").render(load_job(path, overrides or None)).artifacts[-1].content
    return body["spec"]["resource"].get("flavor_id")


def test_a_pool_gets_its_flavor_by_card_count_and_a_warning_about_the_card_type(tmp_path):
    path = job_file(tmp_path, "{accelerator: A100, gpus_per_node: 8}", "{pool_id: pool-1}")
    with pytest.warns(CloudtrainWarning, match="the card type is the pool's.*make sure its nodes have A100"):
        assert flavor(path) == "modelarts.pool.visual.8xlarge"
    other = job_file(tmp_path / "b", "{instance_type: p4d.24xlarge}", "{pool_id: pool-1}")
    with pytest.warns(CloudtrainWarning):
        assert flavor(other) == "modelarts.pool.visual.8xlarge"  # ec2's A100 x 8, never 'p4d.24xlarge'
    with pytest.raises(JobFileError) as info:
        flavor(path, **{"resources.gpus_per_node": 3})
    # every --set error reads so (tests/core/test_job_file.py): the --set, the field, the message
    assert str(info.value).startswith("--set resources.gpus_per_node=3: resources.gpus_per_node: a ModelArts dedicated "
                                      "pool gives 1, 2, 4, 8 or 16")
    named = job_file(tmp_path / "c", "{gpus_per_node: 8}",
                     "{pool_id: pool-1, flavor_id: modelarts.pool.visual.4xlarge}")
    with pytest.raises(JobFileError) as info:
        flavor(named)
    assert str(info.value).startswith(f"{named}:6: providers.modelarts.flavor_id: "
                                      "modelarts.pool.visual.4xlarge gives 4")


def test_a_public_flavor_comes_from_the_catalog_or_exit_2(tmp_path):
    path = job_file(tmp_path, "{accelerator: V100-32GB, gpus_per_node: 1}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert flavor(path) == "modelarts.p3.large.public"
    a100 = job_file(tmp_path / "b", "{accelerator: A100, gpus_per_node: 8}")
    with pytest.raises(JobFileError) as info:
        flavor(a100)
    text = str(info.value)
    assert text.startswith(f"{a100}:4: resources.accelerator: modelarts offers no A100")
    assert "providers.modelarts.pool_id" in text and info.value.exit_code == 2
    raw = job_file(tmp_path / "c", "{instance_type: p4d.24xlarge}")
    with pytest.raises(JobFileError, match="modelarts offers no A100"):
        flavor(raw)  # before: sent as flavor_id 'p4d.24xlarge'
    own = job_file(tmp_path / "d", "{gpus_per_node: 8}", "{flavor_id: modelarts.bm.gpu.8xnew}")
    assert flavor(own) == "modelarts.bm.gpu.8xnew"  # spelled ModelArts' way, newer than the catalog: as written


FLAVORS = [  # FlavorResponse as the API reference's table describes it
    {"flavor_id": "modelarts.p3.large.public", "flavor_name": "GPU: 1*NVIDIA-V100(32GB) | CPU: 8 vCPUs 64GB",
     "max_num": 10, "flavor_type": "GPU",
     "flavor_info": {"max_num": 10, "cpu": {"arch": "x86", "core_num": 8}, "memory": {"size": 64, "unit": "GB"},
                     "gpu": {"unit_num": 1, "product_name": "NVIDIA-V100", "memory": "32GB"}}},
    {"flavor_id": "modelarts.bm.npu.arm.8snt9b3.d", "flavor_name": "Ascend: 8*ascend-snt9b3", "max_num": 8,
     "flavor_type": "Ascend",
     "flavor_info": {"max_num": 8, "cpu": {"arch": "aarch64", "core_num": 192}, "memory": {"size": 1536, "unit": "GB"},
                     "npu": {"unit_num": 8, "product_name": "Ascend-snt9b", "memory": "64GB"}}},
    {"flavor_id": "modelarts.vm.cpu.8u", "flavor_name": "CPU: 8 vCPUs 32GB", "max_num": 10, "flavor_type": "CPU",
     "flavor_info": {"max_num": 10, "cpu": {"arch": "x86", "core_num": 8}, "memory": {"size": 32, "unit": "GB"}}},
]


def test_refresh_through_show_training_job_flavors(tmp_path, monkeypatch):
    with FakeModelArts() as fake:
        fake.flavors = FLAVORS
        env = {"HOME": str(tmp_path), "HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK,
               "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT, "HUAWEICLOUD_SDK_REGION": "cn-north-4",
               "HUAWEICLOUD_SDK_REGION_MODELARTS_CN_NORTH_4": fake.url}
        proc = run_cli("resources", "--refresh", "-p", "modelarts", "--out", tmp_path, env=env, check=0)
        assert fake.count("GET", r"/v2/%s/training-job-flavors$" % PROJECT) == 1
    assert proc.stdout.split() == [str(tmp_path / "modelarts.json")]
    fresh = catalog.load(str(tmp_path / "modelarts.json"))
    v100, npu = fresh.get("modelarts.p3.large.public"), fresh.get("modelarts.bm.npu.arm.8snt9b3.d")
    assert (v100.accelerator, v100.count, v100.vcpus, v100.memory_gb) == ("V100-32GB", 1, 8, 64)
    assert (npu.accelerator, npu.count) == ("Ascend-910B", 8)
    assert fresh.get("modelarts.vm.cpu.8u") is None  # no card: not a row


def test_a_refused_refresh_carries_the_services_code_request_id_and_fix(tmp_path, monkeypatch):
    """The refresh's errors are worded as every ModelArts call's (sdk.api_errors): the error code, the
    message, the request id and what to do, exit 3; the catalog is left as it was."""
    from cloudtrain.spec.errors import PlatformError
    from cloudtrain_modelarts import catalog as modelarts_catalog
    with FakeModelArts() as fake:
        monkeypatch.setenv("HOME", str(tmp_path))
        for name, value in {"HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK, "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT,
                            "HUAWEICLOUD_SDK_REGION_MODELARTS_CN_NORTH_4": fake.url}.items():
            monkeypatch.setenv(name, value)
        refusal = ("GET", r"/training-job-flavors$", 403, "ModelArts.0103", "no permission to list flavors")
        fake.fail_next.append(refusal)
        with pytest.raises(PlatformError) as info:
            modelarts_catalog.refresh(region="cn-north-4", out_dir=str(tmp_path))
    text = str(info.value)
    assert "ModelArts.0103: no permission to list flavors (HTTP 403)" in text
    assert "check the user's" in text
    assert info.value.request_id and info.value.request_id.startswith("req-")
    assert text.endswith(f"(request id {info.value.request_id})")
    assert not (tmp_path / "modelarts.json").exists()


# -- issue 30 item 4: a configured flavor never overrides the job's neutral request in silence ----------------
def test_a_configured_flavor_naming_another_card_is_exit_2_naming_both(tmp_path):
    """The account config's flavor_id modelarts.vm.gpu.8v100 (not in the catalog, so not checked by its row)
    for an accelerator: A100 job: exit 2 at the config's line, naming the flavor and the accelerator."""
    env = {"CLOUDTRAIN_CONFIG": "", "CLOUDTRAIN_HOME": str(tmp_path / "ct")}
    run_cli("config", "set", "-p", "modelarts", "flavor_id=modelarts.vm.gpu.8v100", env=env, check=0)
    config = tmp_path / "ct" / "config.yaml"
    path = job_file(tmp_path / "a", "{accelerator: A100, gpus_per_node: 8}")
    for command in ("validate", "render"):
        proc = run_cli(command, path, "-p", "modelarts", env=env)
        assert proc.returncode == 2, proc.stderr
        # (a warning that the flavor is not in the catalog may come first: validate says both)
        line = next(x for x in proc.stderr.splitlines()
                    if "providers.modelarts.flavor_id" in x and x.startswith("cloudtrain: error:"))
        assert line.startswith(f"cloudtrain: error: {config}:") and "modelarts.vm.gpu.8v100" in line and "A100" in line
    # the same flavor for a V100 job, or a job that names no accelerator, is taken as given
    assert flavor(job_file(tmp_path / "b", "{accelerator: V100, gpus_per_node: 8}"),
                  **{"providers.modelarts.flavor_id": "modelarts.vm.gpu.8v100"}) == "modelarts.vm.gpu.8v100"


def test_a_catalog_flavor_smaller_than_the_job_asks_is_exit_2(tmp_path):
    """modelarts.p3.large.public: 8 vCPUs, 64 GiB (the catalog row's source: opensourceways/xihe-server)."""
    path = job_file(tmp_path, "{cpus_per_node: 32}", "{flavor_id: modelarts.p3.large.public}")
    with pytest.raises(JobFileError, match=r"providers.modelarts.flavor_id: modelarts.p3.large.public has 8 vCPUs"):
        flavor(path)


def test_a_cpu_job_gets_its_flavor_at_submit_while_the_catalog_lists_none(tmp_path):
    """The catalog holds GPU flavors only (no public source lists a CPU training flavor with its cores and
    memory): a CPU job's flavor is chosen at submit from the region's list (test_modelarts_cpu_flavor.py),
    so validate passes without flavor_id and the render says what submit will take."""
    assert not [r for r in catalog.load(catalog.package_file(
        __import__("cloudtrain_modelarts.catalog").catalog.__file__, "modelarts.json")).rows if not r.accelerator]
    path = job_file(tmp_path, "{cpus_per_node: 4}", "{region: cn-north-4, code_store: 'obs://b/x/'}")
    proc = run_cli("validate", path, "-p", "modelarts")
    assert proc.returncode == 0, proc.stderr
    with pytest.warns(CloudtrainWarning, match="submit takes the smallest CPU flavor with >= 4 vCPUs"):
        assert flavor(path) == "<chosen at submit: the smallest CPU flavor with >= 4 vCPUs>"


def test_cpus_and_memory_on_a_pool_are_said_to_be_unsent(tmp_path):
    """On a dedicated pool spec.resource carries the pool flavor only: the job's minimums are not silently dropped."""
    path = job_file(tmp_path, "{accelerator: V100, gpus_per_node: 8, cpus_per_node: 60}", "{pool_id: pool-1}")
    with pytest.warns(CloudtrainWarning,
                      match="resources.cpus_per_node/memory_gb are not sent on dedicated pool pool-1"):
        assert flavor(path) == "modelarts.pool.visual.8xlarge"
