"""Issue 41's done-when case on the doubles, through the real SDKs of every platform.

A 2-node digits job with ``max_restarts: 3``, ``storage.checkpoint`` and ``-p sagemaker,azure,tione``:

- SageMaker's double (moto behind ``doubles.aws_double``) runs attempt 0 as a managed spot job; a
  checkpoint is in its S3; the spot instances are interrupted (SecondaryStatus ``Interrupted``)
  and SageMaker's own resumes run out (``Stopped``/``MaxWaitTimeExceeded``).  SageMaker restarts a
  job itself, so the controller adds no restart there; but capacity lost for good is the
  controller's: it moves the job to the next provider, Azure ML, after copying the checkpoint from
  S3 to the Azure ML datastore (the bytes that arrive in the double's blob store are compared).
- Azure's double then fails attempt 1 with a node failure (run history's ``RunDetails.error``):
  the controller submits attempt 2 on Azure again (the same store: nothing to carry), which finishes.
- ``cloudtrain status -o json`` shows three attempts with reasons and costs, ``cloudtrain list``
  one job, and nothing runs on any double (TI-ONE's was never sent anything).

The platform's words: SecondaryStatus values and their meaning are botocore's sagemaker service
model (``DescribeTrainingJobResponse.SecondaryStatus``: "Interrupted - The job stopped because the
managed spot training instances were interrupted", "MaxWaitTimeExceeded - The job stopped because
it exceeded the maximum allowed wait time"); Azure ML's run error is a ``RootError`` (code, inner
error, message) in the runhistory models azure-ai-ml ships, with the node-failure code the azure
provider's ``failure_words`` cite.
"""
import hashlib
import json

import pytest
from tencentcloud.common.credential import Credential

import cloudtrain
from cloudtrain.api import controller as make_controller, render_with_hooks
from cloudtrain.extend import plugins
from cloudtrain.orchestrate import controller, ledger
from cloudtrain.runtime.store import Store
from conftest import EXAMPLES, ROOT, run_cli
from doubles.azure_double import ARM, FakeAzure, FakeCredential
from doubles.tione_double import SECRET_ID, SECRET_KEY, FakeTione

from cloudtrain_tione.provider import TioneProvider

BUCKET = "ct-bucket"
SUB, RG, WS = "00000000-0000-0000-0000-000000000000", "rg", "ws"
CHECKPOINTS = {"sagemaker": f"s3://{BUCKET}/ckpt/digits/",
               "azure": "azureml://datastores/workspaceblobstore/paths/ckpt/digits/",
               "tione": "cos://train-1250000000/ckpt/digits/"}
OPTIONS = {"sagemaker": {"role_arn": "arn:aws:iam::123456789012:role/train", "output_s3": f"s3://{BUCKET}/runs",
                         "spot": True, "instance_type": "ml.g5.xlarge"},
           "azure": {"subscription_id": SUB, "resource_group": RG, "workspace": WS, "compute": "a100-cluster",
                     "vm_size": "Standard_NC24ads_A100_v4"},
           "tione": {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST",
                     "code_source": "cos://train-1250000000/code/digits/"}}
# botocore's sagemaker model, DescribeTrainingJobResponse.SecondaryStatus (see the module)
INTERRUPTED = "The job stopped because the managed spot training instances were interrupted."
MAX_WAIT = "The job stopped because it exceeded the maximum allowed wait time."
# run history's RootError of a run that lost a node (code/innerError/message: runhistory models)
NODE_LOST = {"code": "ServiceError", "innerError": {"code": "NodeFailure"},
             "message": "Node tvmps_0001 of cluster gpu-cluster became unusable during the job"}


def digits(provider: str):
    """The one job, as ``submit -p sagemaker,azure,tione`` loads it for each: every provider's
    section, and ``storage.checkpoint`` naming each provider's own store."""
    sets = {f"providers.{name}.{k}": v for name, options in OPTIONS.items() for k, v in options.items()}
    sets.update({f"storage.checkpoint.{name}": uri for name, uri in CHECKPOINTS.items()})
    return cloudtrain.load_job(EXAMPLES / "digits-ddp" / "job.yaml", overrides={**sets, "max_restarts": 3},
                               provider=provider)


def priced_sagemaker_catalog(home):
    """The user's copy of SageMaker's catalog with a price for ml.g5.xlarge in us-east-1 (the
    shipped one has none: SageMaker's prices come from the Price List, which ``catalog refresh``
    reads and the double does not serve); the rates are the test's own."""
    data = json.loads((ROOT / "plugins" / "cloudtrain_aws" / "catalogs" / "sagemaker.json").read_text())
    for row in data["rows"]:
        if row["instance_type"] == "ml.g5.xlarge":
            row.update(price=1.408, prices={"us-east-1": {"on_demand": 1.408, "spot": 0.4224}}, currency="USD",
                       price_note=None, price_source="the test's own rate")
    (home / "catalogs").mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "catalogs" / "sagemaker.json").write_text(json.dumps(data))


@pytest.fixture
def azure():
    server = FakeAzure(SUB, RG, WS).start()
    server.computes["a100-cluster"] = "Standard_NC24ads_A100_v4"  # priced in the shipped catalog
    yield server
    server.stop()
    assert not server.crashes, "the fake crashed:\n" + "\n".join(server.crashes)


@pytest.fixture
def tione():
    with FakeTione() as server:
        yield server
    assert not server.bad_requests, server.bad_requests


def started(aws_server, azure, tione, home, monkeypatch):
    """Attempt 0 sent to SageMaker as ``submit -p sagemaker,azure,tione`` sends it (the ledger
    row, the plan with the three candidates), and a controller to drive by rounds."""
    aws = aws_server.fresh(monkeypatch, BUCKET)
    priced_sagemaker_catalog(home)
    for key, value in azure.proxy_env().items():  # the blob client azure-storage-blob builds reaches the double
        monkeypatch.setenv(key, value)
    providers = {"sagemaker": plugins.get_provider("sagemaker", **aws.clients()),
                 "azure": plugins.get_provider("azure", credential=FakeCredential(),
                                               client_kwargs={"transport": azure.transport()}, poll=0),
                 "tione": TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY), endpoint=tione.url, poll=0)}
    rendered = [render_with_hooks(providers[name], digits(name), submit=True)
                for name in ("sagemaker", "azure", "tione")]
    run = providers["sagemaker"].submit(rendered[0])
    ledger.record(run.handle, rendered[0])
    store = Store()
    assert controller.adopt(run.handle, rendered, store=store)
    c = make_controller(store=store, poll=0, provider_for=lambda name, profile: providers[name])
    [name] = [j["TrainingJobName"] for j in aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]]
    return aws, run, store, c, name


def test_preempted_on_sagemaker_goes_on_on_azure_with_the_checkpoint_then_restarts_there(
        aws_server, azure, tione, home, monkeypatch, tmp_path):
    aws, run, store, c, name = started(aws_server, azure, tione, home, monkeypatch)

    # attempt 0 trains on SageMaker and leaves a checkpoint in its S3 (CheckpointConfig's sync)
    aws.set_training(name, "InProgress", "Training", "Training image download completed. Training in progress.")
    c.tick()
    assert store.plan_get(run.handle)["state"] == "RUNNING"
    weights = hashlib.sha256(b"digits").digest() * 40_000  # 1.28 MB
    s3 = aws.client("s3")
    s3.put_object(Bucket=BUCKET, Key="ckpt/digits/checkpoint.pt", Body=weights)
    s3.put_object(Bucket=BUCKET, Key="ckpt/digits/meta/epoch.json", Body=b'{"epoch": 2}')
    # the spot instances are taken away: SageMaker resumes the job itself, the controller only watches
    aws.set_training(name, "InProgress", "Interrupted", INTERRUPTED)
    c.tick()
    assert [a["attempt"] for a in store.attempts(run.handle)] == [0]
    # ... until its MaxWaitTimeInSeconds ran out: the job is the controller's to move
    aws.set_training(name, "Stopped", "MaxWaitTimeExceeded", MAX_WAIT)
    c.tick()
    rows = store.attempts(run.handle)
    assert [(r["attempt"], r["provider"], r["kind"]) for r in rows[:1]] == [(0, "sagemaker", "preemption")]
    assert [(r["attempt"], r["provider"]) for r in rows] == [(0, "sagemaker"), (1, "azure")]
    # the checkpoint arrived in Azure's store byte for byte, before attempt 1 was sent
    assert azure.blobs["azureml-blobstore/ckpt/digits/checkpoint.pt"]["data"] == weights
    assert azure.blobs["azureml-blobstore/ckpt/digits/meta/epoch.json"]["data"] == b'{"epoch": 2}'
    events = [(e["event"], e["detail"]) for e in store.events(run.handle)]
    carried = [d for e, d in events if e == "checkpoint"]
    assert carried == [f"checkpoint carried from {CHECKPOINTS['sagemaker']} to {CHECKPOINTS['azure']}: "
                       f"2 file(s), {len(weights) + 12} bytes, sha256 checked"]
    assert [e for e, _ in events].index("checkpoint") < [e for e, _ in events].index("submitted", 1)
    puts = [r for r in azure.calls(ARM, "PUT", "/jobs/")]
    blob_puts = [i for i, r in enumerate(azure.requests) if r["method"] == "PUT" and "ckpt/digits" in r["path"]]
    job_put = azure.requests.index(puts[0])
    assert blob_puts and max(blob_puts) < job_put
    first = puts[0]["body"]["properties"]
    assert first["environmentVariables"]["CLOUDTRAIN_RESTART_COUNT"] == "1"
    assert first["outputs"]["checkpoint"]["uri"] == CHECKPOINTS["azure"]

    # attempt 1 runs on Azure, which then loses a node: restarted there (the same store)
    az1 = rows[1]["attempt_handle"].rsplit("/", 1)[1]
    azure.jobs[az1]["properties"]["status"] = "Running"
    c.tick()
    azure.jobs[az1]["properties"]["status"] = "Failed"
    azure.run_errors[az1] = NODE_LOST
    c.tick()
    rows = store.attempts(run.handle)
    assert [(r["attempt"], r["provider"], r["kind"]) for r in rows] == [
        (0, "sagemaker", "preemption"), (1, "azure", "node-failure"), (2, "azure", None)]
    assert [e["event"] for e in store.events(run.handle)].count("checkpoint") == 1  # nothing to carry within azure
    az2 = rows[2]["attempt_handle"].rsplit("/", 1)[1]
    second = azure.jobs[az2]["properties"]
    assert second["environmentVariables"]["CLOUDTRAIN_RESTART_COUNT"] == "2"
    azure.jobs[az2]["properties"]["status"] = "Running"
    c.tick()
    azure.jobs[az2]["properties"]["status"] = "Completed"
    assert c.tick() == 0
    assert store.plan_get(run.handle)["state"] == "SUCCEEDED"

    # what the user sees, from cloudtrain itself
    env = {**aws.env(), "PYTHONPATH": f"{ROOT / 'tests' / 'support'}:{ROOT / 'tests'}",
           "CT_AZURE_FAKE_PORT": str(azure.port), "CLOUDTRAIN_PLUGINS": "ct_fakeone.plugin,doubles.azure_loopback",
           "CLOUDTRAIN_DISABLE_PLUGINS": "azure"}
    shown = json.loads(run_cli("status", run.handle, "-o", "json", env=env, cwd=tmp_path, check=0).stdout)
    assert shown["handle"] == run.handle and shown["state"] == "SUCCEEDED"
    attempts = shown["attempts"]
    assert [(a["attempt"], a["provider"]) for a in attempts] == [(0, "sagemaker"), (1, "azure"), (2, "azure")]
    assert attempts[0]["reason"].startswith("preemption: MaxWaitTimeExceeded")
    assert attempts[1]["reason"].startswith("node-failure: ServiceError: NodeFailure: Node tvmps_0001")
    assert attempts[2]["reason"]
    assert all(isinstance(a["cost"], float) and a["started_at"] and a["ended_at"] for a in attempts), attempts
    listed = run_cli("list", "-o", "json", env=env, cwd=tmp_path, check=0).stdout
    assert [j["handle"] for j in json.loads(listed)] == [run.handle]

    # nothing is left running anywhere
    summaries = aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    assert [j["TrainingJobStatus"] for j in summaries] == ["Stopped"]
    assert sorted(j["properties"]["status"] for j in azure.jobs.values()) == ["Completed", "Failed"]
    assert tione.tasks == {} and not [c for c in tione.calls if c["action"] == "CreateTrainingTask"]


def test_a_checkpoint_that_cannot_be_carried_sends_no_next_attempt(aws_server, azure, tione, home, monkeypatch):
    """S3 refuses every read (403): the move is tried on each round, no attempt is sent without
    the checkpoint, and after three tries the job ends FAILED saying why."""
    aws, run, store, c, name = started(aws_server, azure, tione, home, monkeypatch)
    aws.set_training(name, "InProgress", "Training", "Training image download completed. Training in progress.")
    aws.client("s3").put_object(Bucket=BUCKET, Key="ckpt/digits/checkpoint.pt", Body=b"weights")
    aws.fail("S3.GET", "forbidden", times=1000)
    aws.set_training(name, "Stopped", "MaxWaitTimeExceeded", MAX_WAIT)
    for _ in range(2):
        c.tick()
        assert store.plan_get(run.handle)["state"] == "PENDING" and len(store.attempts(run.handle)) == 1
    c.tick()
    plan = store.plan_get(run.handle)
    assert plan["state"] == "FAILED"
    assert plan["reason"].startswith(f"the checkpoint could not be carried from sagemaker ({CHECKPOINTS['sagemaker']}) "
                                     f"to azure ({CHECKPOINTS['azure']}): ")
    assert "S3 refused: 403" in plan["reason"] and plan["reason"].endswith("(3 tries)")
    [only] = store.attempts(run.handle)
    assert only["state"] == "ended" and only["kind"] == "preemption"
    assert not azure.calls(ARM, "PUT", "/jobs/") and not [k for k in azure.blobs if "ckpt" in k]
    assert [e["event"] for e in store.events(run.handle)].count("checkpoint-failed") == 3
