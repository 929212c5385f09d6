"""azure: storage.inputs / storage.output (issue 17) as the command job's ``inputs`` and ``outputs``,
loaded back with ``azure.ai.ml.load_job``, checked by the SDK's own binding validation and turned
into the REST body MLClient sends.

Pinned facts:
- The URIs Azure ML takes for a job's data: seed 002 (the PyTorch example's note), "AzureML
  supports https://, abfss://, wasbs:// and azureml:// URIs".  azure-ai-ml's ``load_job`` passes
  any string on (it takes s3:// too), so the list is the documented one.
- Input modes: ``ro_mount`` / ``download`` / ``direct`` (azure-ai-ml, ``azure.ai.ml.Input``:
  "'ro_mount': Mount the data to the compute target as read-only"); REST ``ReadOnlyMount``.
  Output modes: ``rw_mount`` / ``upload`` / ``direct`` (``azure.ai.ml.Output``); REST ``ReadWriteMount``.
- ``${{inputs.NAME}}`` / ``${{outputs.NAME}}`` are bindings of the *command*: azure-ai-ml's schema
  (``azure/ai/ml/_schema/job/parameterized_command.py``, ``command``: "may contain place holders of
  inputs"), ``validate_inputs_for_command`` (``entities/_job/_input_output_helpers.py``) and
  ``CommandComponent._validate_command`` check the command's bindings against the declared inputs
  and outputs (``environment_variables`` is a plain dict that nothing resolves).  Seed
  002's example passes its input the same way: ``--data-dir ${{inputs.cifar}}``.
- ``MLClient.jobs.download`` reads an output through its datastore: ``download_artifact_from_aml_uri``
  (``azure/ai/ml/_artifacts/_artifact_utilities.py``) parses ``AzureMLDatastorePathUri``, which
  refuses anything but ``azureml://`` -- so storage.output takes datastore URIs only.
"""
import warnings

import pytest

from cloudtrain.spec.errors import CloudtrainWarning
from cloudtrain.input.loading import load_job as load_ct_job
from cloudtrain.extend.plugins import get_provider
from conftest import write_job
from test_azure_render import make_job, render, sdk_round_trip

DATA = "azureml://datastores/data/paths/digits/train"
OUT = "azureml://datastores/runs/paths/digits/"


def sdk_validated(content, tmp_path):
    """The REST body, after the SDK's own check of the command's data bindings."""
    loaded, rest = sdk_round_trip(content, tmp_path)
    result = loaded.component._validate()
    assert result.passed, result.error_messages
    return rest


def test_inputs_are_read_only_mounts_and_the_output_a_read_write_mount(tmp_path):
    inputs = {"train": DATA, "vocab": "https://acct.blob.core.windows.net/nlp/vocab.txt",
              "val": "wasbs://nlp@acct.blob.core.windows.net/val/", "lake": "abfss://fs@acct.dfs.core.windows.net/x/y"}
    content = render(make_job(tmp_path, storage={"inputs": inputs, "output": OUT}))
    rest = sdk_validated(content, tmp_path)
    assert rest["inputs"] == {
        "train": {"jobInputType": "uri_folder", "uri": DATA, "mode": "ReadOnlyMount"},
        "vocab": {"jobInputType": "uri_folder", "uri": inputs["vocab"], "mode": "ReadOnlyMount"},
        "val": {"jobInputType": "uri_folder", "uri": inputs["val"], "mode": "ReadOnlyMount"},
        "lake": {"jobInputType": "uri_folder", "uri": inputs["lake"], "mode": "ReadOnlyMount"},
    }
    assert rest["outputs"] == {
        "cloudtrain_output": {"jobOutputType": "uri_folder", "uri": OUT, "mode": "ReadWriteMount"}}
    # every node sees the mounts' paths, exported by the command (bindings resolve there only)
    assert content["command"].startswith(
        "export CLOUDTRAIN_INPUT_LAKE=${{inputs.lake}} CLOUDTRAIN_INPUT_TRAIN=${{inputs.train}} "
        "CLOUDTRAIN_INPUT_VAL=${{inputs.val}} CLOUDTRAIN_INPUT_VOCAB=${{inputs.vocab}} "
        "CLOUDTRAIN_OUTPUT_DIR=${{outputs.cloudtrain_output}}; ")
    assert "CLOUDTRAIN_OUTPUT_DIR" not in rest["environmentVariables"]
    # without storage.output, CLOUDTRAIN_OUTPUT_DIR stays ./outputs (Azure ML uploads it as the job's files)
    plain = render(make_job(tmp_path))
    assert plain["environment_variables"]["CLOUDTRAIN_OUTPUT_DIR"] == "outputs" and "export" not in plain["command"]


def test_a_binding_the_job_does_not_declare_fails_the_sdks_own_check(tmp_path):
    # what makes the test above mean something: the SDK refuses a binding to an undeclared input
    # (CommandJob._to_rest_object -> validate_inputs_for_command, azure/ai/ml/entities/_job/
    # _input_output_helpers.py) or output (CommandComponent._validate_command)
    from azure.ai.ml.exceptions import ValidationException
    content = render(make_job(tmp_path, storage={"inputs": {"train": DATA}, "output": OUT}))
    wrong_input = dict(content, command=content["command"].replace("inputs.train", "inputs.nope"))
    with pytest.raises(ValidationException, match="Inputs to job does not contain 'nope' referenced in command"):
        sdk_round_trip(wrong_input, tmp_path)
    wrong_output = dict(content, command=content["command"].replace("outputs.cloudtrain_output", "outputs.nope"))
    loaded, _ = sdk_round_trip(wrong_output, tmp_path)
    assert loaded.component._validate().error_messages == {"command": "Invalid data binding expression: outputs.nope"}


@pytest.mark.parametrize("uri", [
    "azureml://datastores/data/paths/digits/train", "azureml://datastores/data/paths/digits/train/",
    "azureml://datastores/data/paths/v1.2", "azureml://datastores/data/paths/imagenet.v2",  # folders with a dot
    "azureml://datastores/data/paths/vocab.txt", "https://acct.blob.core.windows.net/c/.hidden",
])
def test_a_neutral_input_is_a_folder_as_azure_ml_takes_an_input_without_a_type(uri, tmp_path):
    # azure-ai-ml: Input(type="uri_folder") is the default (azure/ai/ml/entities/_inputs_outputs/input.py);
    # a folder's last segment may have a dot, which no render can tell from a file's extension
    content = render(make_job(tmp_path, storage={"inputs": {"train": uri}}))
    assert sdk_validated(content, tmp_path)["inputs"]["train"]["jobInputType"] == "uri_folder"


def test_an_input_that_looks_like_a_file_is_a_folder_with_a_warning_naming_the_fix(tmp_path):
    with pytest.warns(CloudtrainWarning, match=r"storage\.inputs\.vocab: .*mounted as a folder.*"
                                               r"providers\.azure\.inputs\.vocab\.type: uri_file"):
        render(make_job(tmp_path, storage={"inputs": {"vocab": "azureml://datastores/d/paths/vocab.txt"}}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said as a file: no warning, a uri_file
        content = render(make_job(tmp_path, storage={"inputs": {"vocab": "azureml://datastores/d/paths/vocab.txt"}},
                                  providers={"azure": {"inputs": {"vocab": {"type": "uri_file"}}}}))
        render(make_job(tmp_path, storage={"inputs": {"train": "azureml://datastores/d/paths/v1.2/"}}))
    assert sdk_validated(content, tmp_path)["inputs"]["vocab"]["jobInputType"] == "uri_file"


def test_the_provider_section_may_set_an_inputs_type_and_mode(tmp_path):
    content = render(make_job(tmp_path, storage={"inputs": {"train": "azureml://datastores/data/paths/v1.2"}},
                              providers={"azure": {"inputs": {"train": {"type": "uri_folder", "mode": "download"}}}}))
    rest = sdk_validated(content, tmp_path)
    assert rest["inputs"]["train"] == {"jobInputType": "uri_folder", "uri": "azureml://datastores/data/paths/v1.2",
                                       "mode": "Download"}


def test_the_command_may_bind_the_neutral_inputs_itself(tmp_path):
    content = render(make_job(tmp_path, storage={"inputs": {"train": DATA}, "output": OUT},
                              command="python train.py --data ${{inputs.train}} --out ${{outputs.cloudtrain_output}}"))
    assert "'${{inputs.train}}'" in content["command"]
    sdk_validated(content, tmp_path)


@pytest.mark.parametrize("text,line,message", [
    ("storage: {inputs: {train: 's3://team/data'}}", 4,
     "storage.inputs.train: azure cannot take 's3://team/data' (scheme s3); it takes azureml://, https://, wasbs://, "
     "abfss://: give one of those"),
    ("storage: {inputs: {train: /data/train}}", 4,
     "storage.inputs.train: azure cannot take '/data/train' (scheme file)"),
    ("storage: {output: 'https://acct.blob.core.windows.net/runs/x/'}", 4,
     "storage.output: azure cannot take 'https://acct.blob.core.windows.net/runs/x/' (scheme https); it takes "
     "azureml://: give one of those"),
    ("storage: {output: 's3://team/runs/'}", 4,  # the inputs' schemes are not offered for the output
     "storage.output: azure cannot take 's3://team/runs/' (scheme s3); it takes azureml://: give one of those"),
    (f"storage: {{output: '{OUT}'}}\nproviders:\n  azure: {{outputs: {{cloudtrain_output: {{mode: upload}}}}}}", 6,
     "providers.azure.outputs.cloudtrain_output: the name 'cloudtrain_output' holds storage.output; "
     "rename this output"),
    (f"storage: {{inputs: {{train: '{DATA}'}}}}\n"
     "providers:\n  azure: {inputs: {train: 'azureml://datastores/x/paths/y'}}", 4,
     f"storage.inputs.train: is {DATA} but providers.azure.inputs.train is azureml://datastores/x/paths/y; keep one"),
])
def test_what_azure_cannot_take_is_refused_at_its_line(tmp_path, text, line, message):
    path = write_job(tmp_path, "name: az\ncommand: python t.py\nimage: img\n" + text + "\n")
    with pytest.raises(Exception) as info:
        get_provider("azure").validate(load_ct_job(path))
    assert f"{path}:{line}: {message}" in str(info.value), str(info.value)


def test_a_node_running_the_rendered_command_reads_its_input_and_writes_its_output(tmp_path):
    """The rendered command, run by ``sh`` in the staged code (what submit uploads) with what Azure
    ML injects into a single node, after Azure ML's substitution of the bindings by the mount paths
    ("the expression is evaluated and the value is substituted": Azure ML docs, concept-expressions).
    Only the substitution and the mounts (two local directories) are this test's own."""
    import subprocess
    import sys
    from cloudtrain.transfer import shipping
    from cloudtrain_azure.detect import node_environment

    job = make_job(tmp_path, distribution={"type": "none", "nodes": 1},
                   storage={"inputs": {"train": DATA}, "output": OUT})
    (tmp_path / "code" / "train.py").write_text(
        "import os, pathlib\n"
        "numbers = pathlib.Path(os.environ['CLOUDTRAIN_INPUT_TRAIN'], 'numbers.txt').read_text().split()\n"
        "pathlib.Path(os.environ['CLOUDTRAIN_OUTPUT_DIR'], 'sum.txt').write_text(str(sum(map(int, numbers))))\n")
    provider = get_provider("azure")
    content = render(job)
    staged = shipping.stage(job, tmp_path / "staged", [provider.node_platform()])
    mounts = {"${{inputs.train}}": tmp_path / "mnt" / "train",
              "${{outputs.cloudtrain_output}}": tmp_path / "mnt" / "out"}
    command = content["command"]
    for binding, mount in mounts.items():
        mount.mkdir(parents=True)
        command = command.replace(binding, str(mount))
    (mounts["${{inputs.train}}"] / "numbers.txt").write_text("1 2 3 4\n")
    bin_dir = tmp_path / "bin"  # the image's python
    bin_dir.mkdir()
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to(sys.executable)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", **content["environment_variables"],
           **node_environment("none", 1, 0, ["127.0.0.1"], 6105, run_id="st-1")}
    proc = subprocess.run(["sh", "-c", command], cwd=staged, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (mounts["${{outputs.cloudtrain_output}}"] / "sum.txt").read_text() == "10"
