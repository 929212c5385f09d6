"""azure: the neutral spot, max_runtime and storage.checkpoint (issue 19) in the command job,
loaded back with ``azure.ai.ml.load_job`` and turned into the REST body MLClient sends."""
import pytest

from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import load_job as load_ct_job
from conftest import write_job
from test_azure_render import make_job, render, sdk_round_trip

CKPT = "azureml://datastores/workspaceblobstore/paths/ckpt/digits/"


def test_spot_max_runtime_and_the_checkpoint_mount_reach_the_rest_body(tmp_path):
    # serverless compute: spot is the job's queue_settings.job_tier (on a compute cluster it is the
    # cluster's tier: test_azure_lifecycle.py, test_spot_on_a_dedicated_cluster_is_refused_...)
    content = render(make_job(tmp_path, spot=True, max_runtime="8h", storage={"checkpoint": CKPT}))
    assert content["queue_settings"] == {"job_tier": "spot"} and content["limits"] == {"timeout": 28800}
    # nodes see the mount as CLOUDTRAIN_CHECKPOINT_DIR: ${{outputs.checkpoint}} resolves in the command only
    assert content["command"].startswith("export CLOUDTRAIN_CHECKPOINT_DIR=${{outputs.checkpoint}}; ")
    loaded, rest = sdk_round_trip(content, tmp_path)
    assert rest["queueSettings"] == {"jobTier": "Spot"}
    assert rest["limits"]["timeout"] == "PT8H"
    # a read-write mount of the datastore path: what one attempt saved, the next one sees
    assert rest["outputs"]["checkpoint"] == {"jobOutputType": "uri_folder", "uri": CKPT, "mode": "ReadWriteMount"}
    plain = render(make_job(tmp_path))
    assert not {"queue_settings", "limits", "outputs"} & set(plain) and "CHECKPOINT" not in plain["command"]


def test_the_checkpoint_output_sits_next_to_the_jobs_own_outputs(tmp_path):
    content = render(make_job(tmp_path, storage={"checkpoint": CKPT},
                              command="python train.py --out ${{outputs.model}}",
                              providers={"azure": {"outputs": {"model": {"type": "uri_folder", "mode": "upload"}}}}))
    _, rest = sdk_round_trip(content, tmp_path)
    assert sorted(rest["outputs"]) == ["checkpoint", "model"]


@pytest.mark.parametrize("text,message", [
    ("storage: {checkpoint: 's3://team/ckpt'}",
     "storage.checkpoint: Azure ML keeps checkpoints under azureml://, got 's3://team/ckpt'"),
    ("spot: true\nproviders:\n  azure: {job_tier: premium}",
     "providers.azure.job_tier: premium disagrees with spot: true; keep one of them"),
    ("max_runtime: 1h\nproviders:\n  azure: {timeout: 60}",
     "providers.azure.timeout: 60 disagrees with max_runtime: 1h; keep one of them"),
    (f"storage: {{checkpoint: '{CKPT}'}}\nproviders:\n  azure: {{outputs: {{checkpoint: {{mode: upload}}}}}}",
     "providers.azure.outputs.checkpoint: the name 'checkpoint' holds storage.checkpoint; rename this output"),
])
def test_what_azure_cannot_take_is_refused_at_its_line(tmp_path, text, message):
    path = write_job(tmp_path, "name: az\ncommand: python t.py\nimage: img\n" + text + "\n")
    from cloudtrain.extend.plugins import get_provider
    with pytest.raises(JobFileError) as info:
        get_provider("azure").render(load_ct_job(path))
    assert str(info.value).startswith(f"{path}:") and message in str(info.value), str(info.value)
