"""azure: a job with storage.inputs/storage.output is created through the real MLClient, and
``cloudtrain outputs`` brings its output back through ``MLClient.jobs.download``.

``jobs.download`` asks run history for the run's named outputs (``rundata``), the data plane for
their datastore URIs (``batchGetResolvedUris``), ARM for the datastore and a SAS token
(``datastores/NAME``, ``listSecrets``), then lists and fetches the blobs with azure-storage-blob
at ``https://fakestore.blob.core.windows.net``.  That blob client is one the SDK builds itself, so
it reaches the fake through ``HTTPS_PROXY`` (a CONNECT tunnel ended on 127.0.0.1 with a test CA's
certificate that ``REQUESTS_CA_BUNDLE`` trusts): real HTTP and TLS, nothing of the SDK replaced.
"""
import os
import re

import pytest

from cloudtrain.spec.errors import BadInput
from conftest import ROOT, run_cli
from doubles.azure_double import STORE_HOST
from test_azure_lifecycle import HERE, RG, SUB, WSNAME, fake, job_puts, loopback_only, make_job, provider  # noqa: F401

DATA = "azureml://datastores/workspaceblobstore/paths/digits/train/"
OUT = "azureml://datastores/runs/paths/digits/run1/"
STORAGE = f"storage: {{inputs: {{train: '{DATA}'}}, output: '{OUT}'}}"


@pytest.fixture
def behind_the_proxy(fake, monkeypatch):
    for key, value in fake.proxy_env().items():
        monkeypatch.setenv(key, value)


def finished_with_files(fake, name, files):
    """The job ended, and its nodes wrote ``files`` to the output's mount (runs/digits/run1/)."""
    fake.jobs[name]["properties"]["status"] = "Completed"
    for path, data in files.items():
        fake.blobs[f"runs/digits/run1/{path}"] = {"data": data, "metadata": {}}
    fake.blobs["runs/digits/run10/not-this-one.txt"] = {"data": b"another run", "metadata": {}}


def test_the_job_mounts_its_data_and_outputs_brings_the_output_back(fake, provider, behind_the_proxy, tmp_path):
    run = provider.submit(make_job(tmp_path, extra=STORAGE))
    [put] = job_puts(fake)
    props, name = put["body"]["properties"], put["path"].rsplit("/", 1)[1]
    assert props["inputs"] == {"train": {"jobInputType": "uri_folder", "uri": DATA, "mode": "ReadOnlyMount"}}
    assert props["outputs"] == {
        "cloudtrain_output": {"jobOutputType": "uri_folder", "uri": OUT, "mode": "ReadWriteMount"}}
    assert props["command"].startswith("export CLOUDTRAIN_INPUT_TRAIN=${{inputs.train}} "
                                       "CLOUDTRAIN_OUTPUT_DIR=${{outputs.cloudtrain_output}}; ")
    # while it runs there is nothing to fetch yet
    with pytest.raises(BadInput, match=rf"is NotStarted: .*cloudtrain wait azure://{SUB}/{RG}/{WSNAME}/{name}"):
        provider.outputs(run.id, tmp_path / "early")
    assert not fake.calls(STORE_HOST)
    finished_with_files(fake, name, {"model.pt": b"\x00weights" * 1000, "logs/metrics.json": b'{"accuracy": 0.95}'})
    dest = tmp_path / "got"
    files = provider.outputs(run.id, dest)
    assert sorted(p.relative_to(dest).as_posix() for p in files) == ["logs/metrics.json", "model.pt"]
    assert (dest / "model.pt").read_bytes() == b"\x00weights" * 1000
    assert sorted(p.name for p in dest.iterdir()) == ["logs", "model.pt"]  # no download folder left behind
    # the SDK's own path: the run's output -> its datastore URI -> the datastore's SAS -> the blobs
    paths = [(r["method"], r["path"].split("/workspaces/ws")[-1]) for r in fake.requests]
    assert paths.index(("POST", "/rundata")) < paths.index(("POST", "/dataversion/batchGetResolvedUris")) \
        < paths.index(("POST", "/datastores/runs/listSecrets"))
    blob_calls = fake.calls(STORE_HOST)
    assert [(r["path"], r["query"].get("prefix")) for r in blob_calls] == [
        ("/runs", "digits/run1/"), ("/runs/digits/run1/logs/metrics.json", None), ("/runs/digits/run1/model.pt", None)]
    assert all(r["query"]["sig"] == "fake" for r in blob_calls)


def test_an_output_the_nodes_left_empty_is_said_so(fake, provider, behind_the_proxy, tmp_path):
    run = provider.submit(make_job(tmp_path, extra=STORAGE))
    finished_with_files(fake, run.id.rsplit("/", 1)[1], {})
    with pytest.raises(BadInput, match=rf"wrote nothing to its output \({re.escape(OUT)}\): .*CLOUDTRAIN_OUTPUT_DIR"):
        provider.outputs(run.id, tmp_path / "got")
    assert [r["query"].get("prefix") for r in fake.calls(STORE_HOST)] == ["digits/run1/"]
    assert list((tmp_path / "got").iterdir()) == []


def test_a_job_without_storage_output_has_nothing_to_download(fake, provider, tmp_path):
    run = provider.submit(make_job(tmp_path))
    fake.jobs[run.id.rsplit("/", 1)[1]]["properties"]["status"] = "Completed"
    with pytest.raises(BadInput, match="has no storage.output.*az ml job download"):
        provider.outputs(run.id, tmp_path / "got")
    assert not fake.calls(STORE_HOST) and not (tmp_path / "got").exists()


def test_cli_outputs(fake, behind_the_proxy, tmp_path):
    """``cloudtrain outputs HANDLE -o DIR`` in a subprocess, with the loopback transport plugged in."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests" / "support"), str(ROOT / "tests"),
                                                       os.environ.get("PYTHONPATH")])),
           "CT_AZURE_FAKE_PORT": str(fake.port),
           "CLOUDTRAIN_PLUGINS": "ct_fakeone.plugin,doubles.azure_loopback", "CLOUDTRAIN_DISABLE_PLUGINS": "azure",
           **fake.proxy_env()}
    job = make_job(tmp_path, extra=STORAGE)
    fake.default_script = [("Completed", {})]
    proc = run_cli("submit", "-p", "azure", job.source.path, env=env, cwd=tmp_path, check=0)
    handle = re.search(r"submitted (azure://\S+)", proc.stderr).group(1)
    finished_with_files(fake, handle.rsplit("/", 1)[1], {"model.pt": b"weights"})
    proc = run_cli("outputs", handle, "-o", tmp_path / "got", env=env, cwd=tmp_path, check=0)
    assert proc.stdout.strip() == f"downloaded 1 file to {tmp_path / 'got'}"
    assert (tmp_path / "got" / "model.pt").read_bytes() == b"weights"
