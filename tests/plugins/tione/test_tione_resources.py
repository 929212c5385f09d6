"""TI-ONE's postpaid specs and resource groups from resources.accelerator x gpus_per_node
(catalogs/tione.json, cloudtrain_tione.catalog), and the catalog's refresh through the SDK's
DescribeBillingSpecs against the loopback double."""
from __future__ import annotations

import json
import re

import pytest
from tencentcloud.tione.v20211111 import models

from cloudtrain.catalogs import catalog
from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain_tione.catalog import GPU_TYPES, tione_catalog
from conftest import run_cli, write_job
from doubles.tione_double import SECRET_ID, SECRET_KEY, FakeTione

# The SDK's ResourceConfigInfo.InstanceType docstring: "TI.GN10.20XLARGE320.POST :  72C320G V100*8"
SDK_SPEC = re.compile(r"^(TI\.[A-Z0-9.]+POST)\s*:\s*(\d+)C(\d+)G(?:\s+(\w+)\*(\d+))?\s*$")


def sdk_specs():
    doc = models.ResourceConfigInfo.InstanceType.__doc__
    return {m.group(1): m.groups()[1:] for m in map(SDK_SPEC.match, doc.splitlines()) if m}


def test_every_catalog_row_is_a_spec_the_sdk_documents():
    """Source: tencentcloud-sdk-python-tione, models.ResourceConfigInfo.InstanceType (计算规格 for后付费)."""
    documented = sdk_specs()
    assert documented["TI.GN10.20XLARGE320.POST"] == ("72", "320", "V100", "8")
    assert documented["TI.GN7.8XLARGE128.POST"] == ("32", "128", "T4", "1")
    for row in tione_catalog().rows:
        cpu, mem, card, count = documented[row.instance_type]
        assert (row.accelerator, row.count, row.memory_gb) == (card, int(count or 0), int(mem))
        assert row.vcpus in (int(cpu), None)  # None: the alias list disagrees (TI.GN10.5XLARGE80.POST)
    assert not any(r.accelerator == "A100" for r in tione_catalog().rows)  # no public A100 postpaid spec


def job_file(tmp_path, resources: str, tione: str = "{}"):
    return write_job(tmp_path, f"""
        name: res
        command: python train.py
        image: img:1
        resources: {resources}
        providers:
          tione: {tione}
        """)


def request(path, **overrides):
    content = get_provider("tione").render(load_job(path, overrides or None)).artifacts[0].content
    models.CreateTrainingTaskRequest()._deserialize(content)
    return content["ResourceConfigInfos"][0]


@pytest.mark.parametrize("accelerator,count,spec", [("V100", 8, "TI.GN10.20XLARGE320.POST"),
                                                    ("T4", 1, "TI.GN7.8XLARGE128.POST"),
                                                    ("v100", 4, "TI.GN10.10XLARGE160.POST")])
def test_postpaid_spec_from_the_accelerator(tmp_path, accelerator, count, spec):
    rc = request(job_file(tmp_path, f"{{accelerator: {accelerator}, gpus_per_node: {count}}}"))
    assert rc["InstanceType"] == spec and "GpuType" not in rc


def test_a100_postpaid_is_exit_2_naming_the_specs_and_a_resource_group(tmp_path):
    path = job_file(tmp_path, "{accelerator: A100, gpus_per_node: 8}")
    with pytest.raises(JobFileError) as info:
        request(path)
    text = str(info.value)
    assert text.startswith(f"{path}:4: resources.accelerator: tione offers no A100")
    assert "TI.GN10.20XLARGE320.POST (V100 x 8)" in text and "providers.tione.resource_group" in text
    assert info.value.exit_code == 2
    with pytest.raises(JobFileError, match=r"resources.gpus_per_node: tione has no postpaid spec with 3 x V100"):
        request(path, **{"resources.accelerator": "V100", "resources.gpus_per_node": 3})


def test_resource_group_gets_gpu_type_and_hundredths_of_cards(tmp_path):
    """GpuType values: SDK models.GpuDetail.Name "GPU 显卡类型；枚举值: V100 A100 T4"; Gpu in 1/100 card
    (ResourceConfigInfo.Gpu "单位：1/100，即100=1卡")."""
    assert "V100 A100 T4" in models.GpuDetail.Name.__doc__ and "100=1卡" in models.ResourceConfigInfo.Gpu.__doc__
    # H800 and A800 too: ResourceConf.GpuType "eg: H800,A800,A100,T4,P4,V100"
    assert "H800,A800" in models.ResourceConf.GpuType.__doc__
    assert set(GPU_TYPES.values()) == {"V100", "A100", "T4", "H800", "A800"}
    group = "{resource_group: trsg-1}"
    rc = request(job_file(tmp_path, "{accelerator: A100, gpus_per_node: 8, cpus_per_node: 90, memory_gb: 900}", group))
    assert (rc["GpuType"], rc["Gpu"], rc["Cpu"], rc["Memory"]) == ("A100", 800, 90000, 921600)
    assert "InstanceType" not in rc
    # another platform's instance type says A100 x 8 too (never sent raw)
    rc = request(job_file(tmp_path / "b", "{instance_type: p4d.24xlarge, cpus_per_node: 90, memory_gb: 900}", group))
    assert (rc["GpuType"], rc["Gpu"]) == ("A100", 800)
    # an explicit gpu_type wins; an accelerator TI-ONE names no GpuType for is exit 2 at its line
    path = job_file(tmp_path / "c", "{accelerator: A100-80GB, gpus_per_node: 8}", group)
    with pytest.raises(JobFileError) as info:
        request(path)
    assert str(info.value).startswith(f"{path}:4: resources.accelerator: TI-ONE documents no GpuType for A100-80GB")
    assert request(path, **{"providers.tione.gpu_type": "A800"})["GpuType"] == "A800"


def test_another_platforms_instance_type_is_translated_or_refused(tmp_path, recwarn):
    rc = request(job_file(tmp_path, "{instance_type: g4dn.xlarge}"))
    assert rc["InstanceType"] == "TI.GN7.8XLARGE128.POST"  # ec2's T4 x 1, never 'g4dn.xlarge'
    assert any("g4dn.xlarge is" in str(w.message) for w in recwarn)
    path = job_file(tmp_path / "b", "{instance_type: p4d.24xlarge}")
    with pytest.raises(JobFileError, match="tione offers no A100"):
        request(path)
    path = job_file(tmp_path / "c", "{instance_type: x9.mega}")
    with pytest.raises(JobFileError) as info:
        request(path)
    assert str(info.value).startswith(f"{path}:4: resources.instance_type: 'x9.mega' is not a tione postpaid spec")


def test_an_explicit_spec_wins_and_is_checked_when_listed(tmp_path):
    path = job_file(tmp_path, "{gpus_per_node: 4}", "{instance_type: TI.GN10.20XLARGE320.POST}")
    with pytest.raises(JobFileError) as info:
        request(path)
    assert str(info.value).startswith(f"{path}:6: providers.tione.instance_type: TI.GN10.20XLARGE320.POST has 8")
    assert request(path, **{"resources.gpus_per_node": 8})["InstanceType"] == "TI.GN10.20XLARGE320.POST"
    newer = job_file(tmp_path / "b", "{gpus_per_node: 8}", "{instance_type: TI.HCCPNV7.96XLARGE2304.POST}")
    assert request(newer)["InstanceType"] == "TI.HCCPNV7.96XLARGE2304.POST"  # newer than the catalog: as written


DOC_SPECS = [  # as DescribeBillingSpecs answers: SpecName = InstanceType, SpecAlias as in InstanceTypeAlias
    {"SpecId": "sv_tione_tr_gn10_8", "SpecName": "TI.GN10.20XLARGE320.POST", "SpecAlias": "72C320G V100*8",
     "Available": True, "AvailableRegion": [], "GpuType": "V100"},
    {"SpecId": "sv_tione_tr_gn7_1", "SpecName": "TI.GN7.8XLARGE128.POST", "SpecAlias": "32C128G T4*1",
     "Available": True, "AvailableRegion": ["ap-guangzhou"], "GpuType": "T4"},
    {"SpecId": "sv_tione_tr_s", "SpecName": "TI.S.LARGE.POST", "SpecAlias": "4C8G", "Available": True,
     "AvailableRegion": []},
    {"SpecId": "x", "SpecName": "TI.X.POST", "SpecAlias": "8C64G MI300*1", "Available": True, "AvailableRegion": [],
     "GpuType": "MI300"},  # no neutral name: left out
]


def test_refresh_through_describe_billing_specs(tmp_path):
    with FakeTione() as fake:
        fake.billing_specs = DOC_SPECS
        env = {"TENCENTCLOUD_SECRET_ID": SECRET_ID, "TENCENTCLOUD_SECRET_KEY": SECRET_KEY,
               "CLOUDTRAIN_TIONE_ENDPOINT": fake.url, "TENCENTCLOUD_REGION": "ap-shanghai"}
        proc = run_cli("resources", "--refresh", "-p", "tione", "--out", tmp_path, env=env, check=0)
        assert fake.bodies("DescribeBillingSpecs") == [{"ChargeType": "POSTPAID_BY_HOUR", "TaskType": "TRAIN"}]
        assert not fake.bad_requests
    assert proc.stdout.split() == [str(tmp_path / "tione.json")]
    fresh = catalog.load(str(tmp_path / "tione.json"))
    assert [r.instance_type for r in fresh.rows] == ["TI.GN10.20XLARGE320.POST", "TI.GN7.8XLARGE128.POST",
                                                     "TI.S.LARGE.POST"]
    for row in fresh.rows:  # the same facts as the shipped file's rows
        shipped = tione_catalog().get(row.instance_type)
        assert (row.accelerator, row.count, row.vcpus, row.memory_gb) == \
            (shipped.accelerator, shipped.count, shipped.vcpus, shipped.memory_gb)
    assert fresh.get("TI.GN7.8XLARGE128.POST").regions == ("ap-guangzhou",)


def test_resources_lists_tione(tmp_path):
    rows = json.loads(run_cli("resources", "-p", "tione", "--accelerator", "V100", "-o", "json", check=0).stdout)
    assert sorted((r["count"], r["instance_type"]) for r in rows) == [
        (1, "TI.GN10.2XLARGE40.POST"), (2, "TI.GN10.5XLARGE80.POST"), (4, "TI.GN10.10XLARGE160.POST"),
        (8, "TI.GN10.20XLARGE320.POST")]


# -- issue 28 item 4: a resource group's GpuType; validate refuses what render refuses -----------------------
def sdk_doc(model, field: str) -> str:
    return getattr(models, model).__dict__[field].__doc__ or ""


def test_validate_refuses_what_render_refuses_for_a_resource_group(tmp_path):
    """resource_group + accelerator: H100: TI-ONE documents no GpuType for it, so render refuses;
    `cloudtrain validate` (which submit runs first) must refuse it too, with the same one line."""
    path = job_file(tmp_path, "{accelerator: H100, gpus_per_node: 8, cpus_per_node: 90, memory_gb: 900}",
                    "{resource_group: trsg-1, region: ap-shanghai, code_store: 'cos://b-1250000000/x'}")
    for command in ("validate", "render"):
        proc = run_cli(command, path, "-p", "tione", check=2)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("cloudtrain: error:")]
        assert len(errors) == 1 and errors[0].startswith(
            f"cloudtrain: error: {path}:4: resources.accelerator: TI-ONE documents no GpuType for H100"), proc.stderr
        assert proc.stdout == ""


def test_gpu_types_the_sdk_documents_are_named_and_taken(tmp_path):
    """The SDK's ResourceConf.GpuType (tione/v20211111/models.py, 3.1.191): "GpuType 卡类型，参考资源组
    上对应的卡类型。eg: H800,A800,A100,T4,P4,V100等 (for预付费)"."""
    from cloudtrain_tione.render import SDK_GPU_TYPES
    assert "H800,A800,A100,T4,P4,V100" in sdk_doc("ResourceConf", "GpuType")
    assert SDK_GPU_TYPES == ("H800", "A800", "A100", "T4", "P4", "V100")
    group = "{resource_group: trsg-1}"
    path = job_file(tmp_path, "{accelerator: H100, gpus_per_node: 8}", group)
    with pytest.raises(JobFileError, match="H800, A800, A100, T4, P4, V100"):
        request(path)
    for card in SDK_GPU_TYPES:  # each one reaches the request through gpu_type (H800, A800, P4 have no neutral name)
        rc = request(job_file(tmp_path / card, "{gpus_per_node: 8}", f"{{resource_group: trsg-1, gpu_type: {card}}}"))
        assert (rc["GpuType"], rc["Gpu"]) == (card, 800)


@pytest.mark.parametrize("resources,tione,field", [
    ("{gpus_per_node: 8, cpus_per_node: 90, memory_gb: 900}", "{resource_group: trsg-1}", "resources.gpus_per_node"),
    ("{cpus_per_node: 8, memory_gb: 32}", "{resource_group: trsg-1, gpus: 0.5}", "providers.tione.gpus"),
])
def test_resource_group_gpus_without_a_card_type_are_exit_2(tmp_path, resources, tione, field):
    """ResourceConf.Gpu counts 1/100 of a card of GpuType ("例如GpuType=T4时，1 Gpu = 1/100 T4卡"): a Gpu
    without GpuType names no card (today's main sent Gpu: 800 alone)."""
    assert "GpuType=T4时" in sdk_doc("ResourceConf", "Gpu")
    path = job_file(tmp_path, resources, tione)
    for command in ("validate", "render"):
        proc = run_cli(command, path, "-p", "tione")
        assert proc.returncode == 2 and f"{field}: a resource group's GPUs need their card type" in proc.stderr
        assert "providers.tione.gpu_type" in proc.stderr


# -- issue 41 item 2: max_restarts is the controller's on TI-ONE (issue 28 item 5 refused it) ------------------
def test_max_restarts_is_kept_by_the_controller_because_create_training_task_has_no_restart_field(tmp_path):
    """CreateTrainingTaskRequest (SDK 3.1.191) has no restart or retry parameter: a task runs once,
    so the request carries no restart and a warning at the field says the controller restarts it."""
    fields = models.CreateTrainingTaskRequest().__dict__
    assert not [f for f in fields if "restart" in f.lower() or "retr" in f.lower()]
    path = write_job(tmp_path, """
        name: mr
        command: python train.py
        image: img:1
        max_restarts: 2
        providers: {tione: {region: ap-shanghai, instance_type: TI.S.LARGE.POST, code_source: "cos://b-1250000000/c/"}}
        """)
    proc = run_cli("validate", path, "-p", "tione")
    assert proc.returncode == 0, proc.stderr
    assert f"{path}:4: max_restarts: TI-ONE's CreateTrainingTask has no restart field" in proc.stderr
    assert "controller submits the job again" in proc.stderr


def test_queue_becomes_queues(tmp_path):
    """CreateTrainingTaskRequest.Queues: "<p>队列ID</p>", a list of str."""
    assert "队列ID" in models.CreateTrainingTaskRequest.Queues.__doc__
    path = job_file(tmp_path, "{}", "{queue: q-abc}")
    content = get_provider("tione").render(load_job(path)).artifacts[0].content
    models.CreateTrainingTaskRequest()._deserialize(content)
    assert content["Queues"] == ["q-abc"]


# -- issue 30 item 4: neutral sizing --------------------------------------------------------------------------
@pytest.mark.parametrize("resources,spec", [("{}", "TI.S.LARGE.POST"),
                                            ("{cpus_per_node: 16, memory_gb: 64}", "TI.S.4XLARGE64.POST"),
                                            ("{cpus_per_node: 20}", "TI.S.6XLARGE48.POST"),
                                            ("{memory_gb: 100}", "TI.S.8XLARGE128.POST")])
def test_a_cpu_job_gets_the_smallest_cpu_spec_that_fits(tmp_path, resources, spec):
    """As SageMaker/EC2 choose without a setting: the TI.S specs of the SDK's InstanceType list."""
    assert request(job_file(tmp_path, resources))["InstanceType"] == spec


def test_a_cpu_job_bigger_than_every_spec_is_exit_2(tmp_path):
    path = job_file(tmp_path, "{cpus_per_node: 100}")
    proc = run_cli("validate", path, "-p", "tione")
    assert proc.returncode == 2
    assert (f"{path}:4: resources.cpus_per_node: no tione postpaid spec without accelerators has 100 vCPUs"
            in proc.stderr)
    assert "TI.S.8XLARGE128.POST" in proc.stderr


def test_a_configured_spec_that_contradicts_the_job_is_exit_2_naming_both(tmp_path):
    """The account config's instance_type never overrides the job's neutral request in silence."""
    env = {"CLOUDTRAIN_CONFIG": "", "CLOUDTRAIN_HOME": str(tmp_path / "ct")}
    run_cli("config", "set", "-p", "tione", "instance_type=TI.GN10.20XLARGE320.POST", env=env, check=0)
    config = tmp_path / "ct" / "config.yaml"
    path = job_file(tmp_path / "a", "{accelerator: A100, gpus_per_node: 8}")
    proc = run_cli("validate", path, "-p", "tione", env=env)
    assert proc.returncode == 2
    assert f"{config}:" in proc.stderr
    assert "providers.tione.instance_type: TI.GN10.20XLARGE320.POST has V100" in proc.stderr
    assert "resources.accelerator is A100" in proc.stderr
    run_cli("config", "set", "-p", "tione", "instance_type=TI.S.LARGE.POST", env=env, check=0)
    path = job_file(tmp_path / "b", "{cpus_per_node: 16}")
    proc = run_cli("validate", path, "-p", "tione", env=env)
    assert proc.returncode == 2
    assert "providers.tione.instance_type: TI.S.LARGE.POST has 4 vCPUs and 8 GiB, but the job asks for 16 vCPUs" \
        in proc.stderr


def test_gpus_without_a_card_still_need_a_spec_and_validate_says_how(tmp_path):
    """TI-ONE has no default card (InstanceRules.defaults is empty): gpus_per_node alone chooses nothing."""
    path = job_file(tmp_path, "{gpus_per_node: 2}", "{region: ap-shanghai, code_store: 'cos://b-1250000000/x'}")
    proc = run_cli("validate", path, "-p", "tione")
    assert proc.returncode == 2
    assert "providers.tione.instance_type: is not set" in proc.stderr and "resources.accelerator" in proc.stderr
    assert run_cli("validate", path, "-p", "tione", "--set", "resources.accelerator=V100").returncode == 0


def test_a_configured_gpu_type_that_contradicts_the_accelerator_is_exit_2(tmp_path):
    """providers.tione.gpu_type (maybe the account's) names the card only where the job's accelerator does not:
    V100 for an accelerator: A100 job is exit 2 naming both; for H100 (no GpuType of its own) H800 is taken."""
    group = "{resource_group: trsg-1, gpu_type: V100}"
    path = job_file(tmp_path, "{accelerator: A100, gpus_per_node: 8, cpus_per_node: 90, memory_gb: 900}", group)
    with pytest.raises(JobFileError, match=r"providers.tione.gpu_type: is V100, but the job asks for A100"):
        request(path)
    path = job_file(tmp_path / "b", "{accelerator: H100, gpus_per_node: 8}", "{resource_group: trsg-1, gpu_type: H800}")
    assert request(path)["GpuType"] == "H800"


def test_shm_gb_is_exit_2_not_dropped(tmp_path):
    """ResourceConfigInfo and CreateTrainingTaskRequest (SDK 3.1.191) have no /dev/shm field."""
    names = [*models.ResourceConfigInfo().__dict__, *models.CreateTrainingTaskRequest().__dict__]
    assert not [n for n in names if "shm" in n.lower() or "sharedmem" in n.lower()]
    path = job_file(tmp_path, "{shm_gb: 16}")
    proc = run_cli("validate", path, "-p", "tione")
    assert proc.returncode == 2
    assert f"{path}:4: resources.shm_gb: TI-ONE's CreateTrainingTask has no /dev/shm" in proc.stderr


@pytest.mark.parametrize("card", ["H800", "A800"])
def test_the_chinese_export_cards_are_resource_group_gpu_types(tmp_path, card):
    """tencentcloud-sdk-python-tione models.ResourceConf.GpuType: "卡类型，参考资源组上对应的卡类型。
    eg: H800,A800,A100,T4,P4,V100等": resources.accelerator H800 / A800 is that GpuType."""
    assert card in models.ResourceConf.GpuType.__doc__
    rc = request(job_file(tmp_path, f"{{accelerator: {card.lower()}, gpus_per_node: 8}}", "{resource_group: trsg-1}"))
    assert (rc["GpuType"], rc["Gpu"]) == (card, 800)
