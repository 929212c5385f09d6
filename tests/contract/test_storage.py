"""storage.inputs / storage.output, the same job file on every provider: each maps what its
platform takes and refuses the rest at the field's line (exit 2, naming the schemes it takes).

Pinned facts:
- SageMaker, File input mode: channel ``<name>`` is downloaded to ``/opt/ml/input/data/<name>``
  before the container starts (SageMaker developer guide, "How Amazon SageMaker Provides Training
  Information": "/opt/ml/input/data/channel_name"); ``OutputDataConfig.S3OutputPath`` receives
  ``/opt/ml/model`` as model.tar.gz; the request shapes are checked with botocore's own model.
- Kubernetes: a ``persistentVolumeClaim`` volume (``claimName``) mounted with ``subPath`` and
  ``readOnly`` (core/v1 VolumeMount); validated against the CRDs of the job kinds.
- Docker Engine API: ``HostConfig.Binds`` entries ``host-src:container-dest[:ro]``.
- TI-ONE: ``DataConfigs`` and ``Output`` as the SDK's models take them (tests/plugins/tione/test_tione_storage.py).
"""
import json

import pytest

from cloudtrain.input.loading import job_from_dict
from cloudtrain.extend.plugins import get_provider
from conftest import run_cli, write_job
from crd_schemas import validate

from doubles.aws_double import validate_request  # noqa: E402

SM = {"role_arn": "arn:aws:iam::123456789012:role/train", "region": "us-east-1"}


def job(storage, provider="local", options=None, **extra):
    data = {"name": "st", "command": "python t.py", "image": "registry.example/i:1", "code": None,
            "storage": storage, "providers": {provider: options or {}}, **extra}
    return job_from_dict(data)


def test_local_gives_host_paths_in_place(tmp_path):
    j = job({"inputs": {"train": str(tmp_path / "data")}, "output": f"file://{tmp_path}/out"}, code=str(tmp_path))
    (env,) = [a.content["env"] for a in get_provider("local").render(j).artifacts]
    assert env["CLOUDTRAIN_INPUT_TRAIN"] == str(tmp_path / "data")
    assert env["CLOUDTRAIN_OUTPUT_DIR"] == str(tmp_path / "out")


def test_a_local_job_reads_its_input_and_writes_its_output(tmp_path, home):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("41")
    (tmp_path / "t.py").write_text(
        "import os\nn = int(open(os.path.join(os.environ['CLOUDTRAIN_INPUT_TRAIN'], 'x.txt')).read())\n"
        "os.makedirs(os.environ['CLOUDTRAIN_OUTPUT_DIR'], exist_ok=True)\n"
        "open(os.path.join(os.environ['CLOUDTRAIN_OUTPUT_DIR'], 'y.txt'), 'w').write(str(n + 1))\n")
    path = write_job(tmp_path, """
        name: st
        command: python t.py
        distribution: {type: none, nodes: 1}
        storage: {inputs: {train: data}, output: results}
        """)
    proc = run_cli("submit", "-p", "local", path, cwd=tmp_path, timeout=120, check=0)
    assert (tmp_path / "results" / "y.txt").read_text() == "42"
    handle = next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("submitted "))
    out = run_cli("outputs", handle, "-o", tmp_path / "fetched", check=0)
    assert (tmp_path / "fetched" / "y.txt").read_text() == "42" and "downloaded 1 file to" in out.stdout


def test_outputs_of_a_local_job_without_storage_output_come_from_its_run_directory(tmp_path, home):
    (tmp_path / "t.py").write_text("import os\nos.makedirs(os.environ['CLOUDTRAIN_OUTPUT_DIR'], exist_ok=True)\n"
                                   "open(os.path.join(os.environ['CLOUDTRAIN_OUTPUT_DIR'], 'm.json'), 'w')"
                                   ".write('{}')\n")
    path = write_job(tmp_path, "name: st\ncommand: python t.py\ndistribution: {type: none, nodes: 1}\n")
    proc = run_cli("submit", "-p", "local", path, cwd=tmp_path, timeout=120, check=0)
    handle = next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("submitted "))
    run_cli("outputs", handle, cwd=tmp_path, check=0)
    assert (tmp_path / "outputs" / handle.partition("://")[2] / "m.json").read_text() == "{}"


def test_outputs_of_a_kubernetes_job_reads_its_cluster(tmp_path):
    # every provider downloads outputs now (Kubernetes: the output claim through a helper pod,
    # tests/plugins/kubernetes/test_kube_outputs.py): here no cluster is reachable, exit 3
    proc = run_cli("outputs", "volcano://default/job-abc", env={"HOME": str(tmp_path), "KUBECONFIG": ""})
    assert proc.returncode == 3 and "cannot download" not in proc.stderr and "Kubernetes credentials" in proc.stderr


def test_docker_binds_inputs_read_only_and_the_output(tmp_path):
    j = job({"inputs": {"train": str(tmp_path / "data")}, "output": str(tmp_path / "out")}, "docker",
            code=str(tmp_path))
    body = next(a.content for a in get_provider("docker").render(j).artifacts if a.kind == "docker/container")
    assert f"{tmp_path / 'data'}:/inputs/train:ro" in body["HostConfig"]["Binds"]
    assert f"{tmp_path / 'out'}:/output" in body["HostConfig"]["Binds"]
    assert "CLOUDTRAIN_INPUT_TRAIN=/inputs/train" in body["Env"] and "CLOUDTRAIN_OUTPUT_DIR=/output" in body["Env"]


def test_sagemaker_maps_inputs_to_channels_and_output_to_output_data_config(tmp_path):
    j = job({"inputs": {"train": "s3://data/digits/train"}, "output": "s3://runs/out"}, "sagemaker", SM,
            code=str(tmp_path))
    arts = {a.kind: a.content for a in get_provider("sagemaker").render(j).artifacts}
    request = arts["sagemaker/CreateTrainingJob"]
    validate_request("sagemaker", "CreateTrainingJob", request, strict=False)
    (train,) = [c for c in request["InputDataConfig"] if c["ChannelName"] == "train"]
    assert train["DataSource"]["S3DataSource"]["S3Uri"] == "s3://data/digits/train"
    assert request["OutputDataConfig"] == {"S3OutputPath": "s3://runs/out"}
    assert request["Environment"]["CLOUDTRAIN_INPUT_TRAIN"] == "/opt/ml/input/data/train"
    assert arts["s3/PutObject"]["Bucket"] == "runs"  # output_s3 is not needed: the code goes next to the output


def test_sagemaker_refuses_the_same_place_said_twice_differently(tmp_path):
    j = job({"output": "s3://runs/out"}, "sagemaker", {**SM, "output_s3": "s3://other/x"}, code=str(tmp_path))
    with pytest.raises(Exception, match="storage.output.*output_s3|output_s3.*keep one"):
        get_provider("sagemaker").render(j)


@pytest.mark.parametrize("provider", ["kubeflow", "volcano", "kubeflow-trainer"])
def test_kubernetes_mounts_pvc_claims(provider):
    j = job({"inputs": {"train": "pvc://data/digits/train"}, "output": "pvc://runs"}, provider)
    objects = [a.content for a in get_provider(provider).render(j).artifacts]
    for obj in objects:
        validate(obj)
    text = json.dumps(objects[-1])
    assert '"claimName": "data"' in text and '"claimName": "runs"' in text
    assert '"mountPath": "/cloudtrain/inputs/train", "subPath": "digits/train", "readOnly": true' in text
    assert '"name": "CLOUDTRAIN_INPUT_TRAIN", "value": "/cloudtrain/inputs/train"' in text
    assert '"name": "CLOUDTRAIN_OUTPUT_DIR", "value": "/cloudtrain/output"' in text


@pytest.mark.parametrize("provider, uri, takes", [
    ("kubeflow", "s3://team/data", "pvc://"),
    ("volcano", "/data/train", "pvc://"),
    ("sagemaker", "pvc://data", "s3://"),
    ("ec2", "/data/train", "s3://"),
    ("modelarts", "s3://team/data", "obs://"),
    ("local", "s3://team/data", "a host path or file://"),
    ("docker", "gs://team/data", "a host path or file://"),
    ("azure", "s3://team/data", "azureml://, https://, wasbs://, abfss://"),
    ("tione", "s3://team/data", "cos://, cfs://, cfsturbo://, goosefsx://"),
])
def test_a_scheme_the_provider_cannot_take_is_exit_2_naming_what_it_takes(tmp_path, provider, uri, takes):
    opts = {"sagemaker": "{role_arn: 'arn:aws:iam::123456789012:role/train', region: us-east-1}"}.get(provider, "{}")
    path = write_job(tmp_path, f"""
        name: st
        command: python t.py
        image: registry.example/i:1
        storage:
          inputs:
            train: {uri}
        providers: {{{provider}: {opts}}}
        """)
    for command in ("render", "validate"):
        proc = run_cli(command, "-p", provider, path, check=2)
        assert f"{path}:6" in proc.stderr and "storage.inputs.train" in proc.stderr
        assert f"it takes {takes}" in proc.stderr


def test_every_built_in_provider_maps_storage():
    """Issue 17's promise: storage.inputs / storage.output map on every provider (none is left
    refusing them); a third-party provider without a mapping still refuses them at their line."""
    from cloudtrain.extend.plugins import get_provider_class
    from cloudtrain.extend.registry import builtin_providers
    built_in = builtin_providers()
    assert len(built_in) >= 12
    assert [n for n in built_in if not get_provider_class(n).storage_schemes] == []


@pytest.mark.parametrize("provider", ["local", "docker", "sagemaker", "azure", "tione", "modelarts", "ec2"])
def test_code_null_is_refused_where_the_launcher_travels_with_the_code(tmp_path, provider):
    path = write_job(tmp_path, "name: st\ncode: null\ncommand: python t.py\nimage: i\n")
    proc = run_cli("validate", "-p", provider, path)
    assert proc.returncode == 2 and f"{path}:2" in proc.stderr and "code: null works on the Kubernetes" in proc.stderr


def test_input_names_become_variable_names():
    with pytest.raises(Exception, match="lowercase"):
        job({"inputs": {"Train-Set": "s3://x"}})
