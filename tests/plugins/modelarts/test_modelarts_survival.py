"""modelarts: the neutral spot, max_runtime and storage.checkpoint (issue 19) in the training job
body, built into the ModelArts SDK's request model (huaweicloudsdkmodelarts v1) strictly; what
the model cannot say is refused (exit 2), citing the model."""
import pytest

import huaweicloudsdkmodelarts.v1 as v1
from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from conftest import write_job
from test_modelarts_render import build, render

POOL = {"region": "cn-north-4", "code_dir": "obs://bkt/code/digits", "pool_id": "pool-a1"}


def test_max_runtime_spot_and_the_checkpoint_volume_reach_the_sdk_model():
    _, body = render(dict(POOL), max_runtime="8h", spot=True, storage={"checkpoint": "obs://team-ckpt/digits/"})
    request, sent = build(body)
    spec = sent["spec"]
    assert spec["auto_stop"] == {"time_unit": "HOURS", "duration": 8}
    assert spec["schedule_policy"] == {"preemptible": True}
    assert spec["volumes"] == [{"obs": {"obs_path": "/team-ckpt/digits", "local_path": "/cache/cloudtrain-checkpoint"}}]
    assert sent["algorithm"]["environments"]["CLOUDTRAIN_CHECKPOINT_DIR"] == "/cache/cloudtrain-checkpoint"
    _, plain = render(dict(POOL))
    assert not {"auto_stop", "volumes", "schedule_policy"} & set(build(plain)[1]["spec"])


def test_auto_stop_counts_whole_hours_so_other_limits_are_refused(tmp_path):
    # huaweicloudsdkmodelarts v1 AutoStop: time_unit "可选取值如下： - HOURS", duration "运行时长，最小值为1"
    assert set(v1.AutoStop.openapi_types) == {"time_unit", "duration"}
    assert "HOURS" in v1.AutoStop.__init__.__doc__
    path = write_job(tmp_path, "name: m\ncommand: python t.py\nimage: img\nmax_runtime: 90m\n")
    with pytest.raises(JobFileError) as info:
        get_provider("modelarts").render(load_job(path))
    assert str(info.value).startswith(f"{path}:4: max_runtime: ModelArts stops a job after whole hours "
                                      "(spec.auto_stop, time_unit HOURS); 1h30m is not: use 2h")


def test_spot_needs_a_dedicated_pool(tmp_path):
    # huaweicloudsdkmodelarts v1 SchedulePolicy: preemptible, "是否可以被抢占"; SpecResource has no spot
    assert "preemptible" in v1.SchedulePolicy.openapi_types
    assert not [f for f in v1.SpecResource.openapi_types if "spot" in f]
    path = write_job(tmp_path, "name: m\ncommand: python t.py\nimage: img\nspot: true\n")
    with pytest.raises(JobFileError) as info:
        get_provider("modelarts").render(load_job(path))
    assert str(info.value).startswith(f"{path}:4: spot: ModelArts has no spot training on its public pools")


def test_a_checkpoint_outside_obs_is_refused(tmp_path):
    path = write_job(tmp_path, "name: m\ncommand: python t.py\nimage: img\nstorage: {checkpoint: 's3://b/c'}\n")
    with pytest.raises(JobFileError, match=r"job.yaml:4: storage.checkpoint: ModelArts keeps checkpoints under obs://"):
        get_provider("modelarts").render(load_job(path))
