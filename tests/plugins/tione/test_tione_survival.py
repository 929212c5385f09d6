"""tione: the neutral spot, max_runtime and storage.checkpoint (issue 19) in CreateTrainingTask,
loaded into the TI-ONE SDK's request model; what the model has no field for is refused (exit 2),
citing the model."""
import inspect

import pytest

from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from conftest import write_job
from test_tione_render import envs, render

models = pytest.importorskip("tencentcloud.tione.v20211111.models")


def request_fields():
    return {name.lstrip("_") for name in vars(models.CreateTrainingTaskRequest())}


def test_spot_is_the_spot_supply_type_and_the_checkpoint_a_read_write_mount():
    # tencentcloud tione v20211111 ResourceSupplyAttribute.SupplyType: "TIDE:潮汐;SPOT:竞价;空:常规按量后付费"
    assert "SPOT:竞价" in inspect.getsource(models.ResourceSupplyAttribute)
    c = render(spot=True, storage={"checkpoint": "cfs://cfs-1a2b3c/ckpt/digits"})
    assert c["ResourceSupplyAttribute"] == {"SupplyType": "SPOT"}
    mount = c["DataConfigs"][-1]
    assert mount == {"MappingPath": "/opt/ml/checkpoint", "DataSourceUsage": "OTHER", "DataSourceType": "CFS",
                     "CFSSource": {"Id": "cfs-1a2b3c", "Path": "/ckpt/digits"}, "ReadOnly": False}
    assert envs(c)["CLOUDTRAIN_CHECKPOINT_DIR"]["Value"] == "/opt/ml/checkpoint"
    cos = render(storage={"checkpoint": "cos://team-ckpt-1250000000/digits/"})
    assert cos["DataConfigs"][-1]["COSSource"] == {"Bucket": "team-ckpt-1250000000", "Region": "ap-shanghai",
                                                   "Paths": ["digits/"]}
    plain = render()
    assert "ResourceSupplyAttribute" not in plain and "CLOUDTRAIN_CHECKPOINT_DIR" not in envs(plain)


def test_max_runtime_is_the_controllers_because_the_request_has_no_such_field(tmp_path):
    # CreateTrainingTaskRequest (tencentcloud-sdk-python tione v20211111): no field limits the run time
    fields = request_fields()
    assert "ResourceSupplyAttribute" in fields and not [f for f in fields if "Time" in f or "Runtime" in f]
    path = write_job(tmp_path, "name: t\ncommand: python t.py\nimage: img\nmax_runtime: 8h\n"
                               "providers: {tione: {instance_type: TI.S.LARGE.POST}}\n")
    import warnings
    from cloudtrain.orchestrate.controller import needs_following
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        job = load_job(path)
        get_provider("tione").render(job)
    said = [str(w.message) for w in caught]
    assert any(text.startswith(f"{path}:4: max_runtime: TI-ONE's CreateTrainingTask has no run-time limit; "
                               "cloudtrain's controller cancels") for text in said), said
    assert needs_following(job, "tione")  # submit hands it to the controller, which cancels at 8h


@pytest.mark.parametrize("text,loc,message", [
    ("spot: true\nproviders: {tione: {resource_group: trsg-1}}", "5: spot",
     "TI-ONE's spot supply (ResourceSupplyAttribute SPOT) is for postpaid specs"),
    ("storage: {checkpoint: 'dataset://ds-1'}\nproviders: {tione: {instance_type: TI.S.LARGE.POST}}",
     "5: storage.checkpoint", "checkpoints cannot go to a dataset"),
    ("storage: {checkpoint: 's3://b/c'}\nproviders: {tione: {instance_type: TI.S.LARGE.POST}}",
     "5: storage.checkpoint", "'s3://b/c' is not a storage URL"),
])
def test_what_tione_cannot_take_is_refused_at_its_line(tmp_path, text, loc, message):
    path = write_job(tmp_path, f"name: t\ncommand: python t.py\nimage: img\nresources: {{}}\n{text}\n")
    with pytest.raises(JobFileError) as info:
        get_provider("tione").render(load_job(path))
    assert str(info.value).startswith(f"{path}:{loc}: {message}"), str(info.value)
