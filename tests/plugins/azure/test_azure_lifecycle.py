"""azure: submit, status, logs, cancel and list through the real ``MLClient``.

The network is replaced at azure-core's transport (``LoopbackTransport``): every request MLClient
makes goes to a fake Azure on 127.0.0.1 (``doubles.azure_double``), which answers ARM, the workspace's
discovery and run-history calls and the log downloads, and serves the code upload's blob calls
at the SAS URL its ``startPendingUpload`` hands out.  Nothing of cloudtrain is mocked.
"""
import json
import re
from pathlib import Path

import pytest

from cloudtrain.spec.errors import BadInput, JobFileError, JobNotFound, PlatformError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain.providers.provider import State
from conftest import ROOT, run_cli, write_job
from doubles.azure_double import ARM, FakeAzure, FakeCredential

SUB, RG, WSNAME = "00000000-0000-0000-0000-000000000000", "rg", "ws"
HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Nothing may leave this machine: every connection goes to 127.0.0.1."""
    import socket
    connect = socket.socket.connect

    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            assert address[0] in ("127.0.0.1", "::1"), f"a connection to {address} left the machine"
        return connect(self, address)
    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def fake():
    server = FakeAzure(SUB, RG, WSNAME).start()
    yield server
    server.stop()
    assert not server.crashes, "the fake crashed:\n" + "\n".join(server.crashes)


@pytest.fixture
def provider(fake):
    return get_provider("azure", credential=FakeCredential(), client_kwargs={"transport": fake.transport()},
                        poll=0)


def make_job(tmp_path, compute="gpu-cluster", extra="", env='{OMP_NUM_THREADS: "1"}'):
    code = tmp_path / "project"
    code.mkdir(exist_ok=True)
    if not (code / "train.py").exists():
        (code / "train.py").write_text("import os\nprint('rank', os.environ.get('RANK'))\n")
    (code / ".git").mkdir(exist_ok=True)
    (code / ".git" / "HEAD").write_text("ref: main\n")
    return load_job(write_job(tmp_path, f"""
        name: digits-ddp
        code: project
        command: python train.py --epochs 2
        image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest
        distribution: {{type: ddp, nodes: 2, procs_per_node: 4}}
        env: {env}
        providers:
          azure:
            subscription_id: "{SUB}"
            resource_group: {RG}
            workspace: {WSNAME}
            compute: {compute}
        {extra}
        """))


def job_puts(fake):
    return [r for r in fake.calls(ARM, "PUT", "/jobs/")]


def test_submit_uploads_the_code_with_the_launcher_and_creates_the_job(fake, provider, tmp_path):
    job = make_job(tmp_path)
    run = provider.submit(job)
    [put] = job_puts(fake)
    name = put["path"].rsplit("/", 1)[1]
    assert re.fullmatch(r"digits-ddp-[0-9a-f]{10}", name)
    assert run.handle == f"azure://{SUB}/{RG}/{WSNAME}/{name}"
    props = put["body"]["properties"]
    assert props["distribution"] == {"distributionType": "PyTorch", "processCountPerInstance": 1}
    assert props["resources"]["instanceCount"] == 2
    assert props["computeId"].endswith("/computes/gpu-cluster")
    assert props["command"].startswith('PYTHONPATH=.cloudtrain"${PYTHONPATH:+:$PYTHONPATH}" '
                                       "python3 -m cloudtrain.launch "
                                       "--platform azure --type ddp --nproc-per-node 4 -- python train.py --epochs 2")
    assert re.fullmatch(r"[0-9a-f]{64}", props["tags"]["cloudtrain.spec"])
    assert name.endswith(props["tags"]["cloudtrain.spec"][:10])
    assert props["environmentVariables"]["CLOUDTRAIN_DETECTORS"] == "azure=cloudtrain_azure.detect:detect"
    assert props["displayName"] == "digits-ddp"
    # the code asset: created from the staged copy, uploaded to the SAS URL the service handed out
    [code_put] = fake.calls(ARM, "PUT", "/codes/")
    assert props["codeId"] == code_put["path"]
    uploaded = {k.split("/", 2)[2]: v["data"] for k, v in fake.blobs.items()}
    assert uploaded["train.py"] == (tmp_path / "project" / "train.py").read_bytes()
    assert ".cloudtrain/cloudtrain_azure/detect.py" in uploaded and ".cloudtrain/cloudtrain/launch/main.py" in uploaded
    assert not [k for k in uploaded if k.startswith(".git/")]
    # the order MLClient and cloudtrain keep: look for the job, read the cluster's size, then create
    order = [(r["method"], r["path"].split("/workspaces/ws")[-1].split("/")[1:2]) for r in fake.calls(ARM)]
    assert order.index(("GET", ["jobs"])) < order.index(("GET", ["computes"])) < order.index(("PUT", ["jobs"]))
    assert all(r["auth"] == "Bearer fake-token-for-tests" for r in fake.calls(ARM))


def test_a_transient_error_is_retried_by_the_sdk_and_the_job_created_once(fake, provider, tmp_path):
    # the SDK's retry sends the same request object again through the bearer-token policy, so the
    # retry must still see the https URL (CI once failed here with "Bearer token authentication is
    # not permitted for non-TLS protected (non-https) URLs" when the transport kept its rewrite)
    fake.transient[("GET", "/jobs/")] = 1
    fake.transient[("PUT", "/jobs/")] = 1
    run = provider.submit(make_job(tmp_path))
    assert fake.transient == {("GET", "/jobs/"): 0, ("PUT", "/jobs/"): 0}
    first, second = job_puts(fake)  # the 503 and its retry, for the same job
    assert first["path"] == second["path"] and first["body"] == second["body"]
    name = second["path"].rsplit("/", 1)[1]
    assert run.handle.endswith("/" + name) and list(fake.jobs) == [name]
    assert fake.jobs[name]["properties"]["resources"]["instanceCount"] == 2


def test_submitting_the_same_spec_again_attaches_to_the_job(fake, provider, tmp_path):
    first = provider.submit(make_job(tmp_path))
    again = provider.submit(make_job(tmp_path))
    assert again.id == first.id and len(job_puts(fake)) == 1
    changed = provider.submit(make_job(tmp_path, env='{OMP_NUM_THREADS: "2"}'))
    assert changed.id != first.id and len(job_puts(fake)) == 2
    (tmp_path / "project" / "train.py").write_text("print('new code')\n")  # the code is part of the spec
    new_code = provider.submit(make_job(tmp_path))
    assert new_code.id not in (first.id, changed.id)
    # running an unchanged job again: change something in the render, e.g. a tag (as the docs say)
    job = load_job(make_job(tmp_path).source.path, ["providers.azure.tags.attempt=2"])
    assert provider.submit(job).id not in (first.id, changed.id, new_code.id) and len(job_puts(fake)) == 4


def test_rdma_on_a_cluster_without_infiniband_is_refused_before_anything_is_created(fake, provider, tmp_path):
    job = make_job(tmp_path, compute="v100-no-ib", extra='network: {rdma: "on"}')
    with pytest.raises(JobFileError) as info:
        provider.submit(job)
    assert info.value.exit_code == 2
    assert "Standard_NC24s_v3" in str(info.value) and "Standard_NC24rs_v3" in str(info.value)
    assert "v100-no-ib" in str(info.value)
    assert fake.calls(ARM, "GET", "/computes/v100-no-ib")
    assert not job_puts(fake) and not fake.calls("127.0.0.1") and not fake.calls(ARM, "PUT")


def test_rdma_auto_on_an_infiniband_cluster_applies_the_presets(fake, provider, tmp_path):
    job = make_job(tmp_path, compute="gpu-cluster")  # Standard_NC24rs_v3 in the fake
    assert "NCCL_IB_DISABLE" not in provider.render(job).artifacts[0].content["environment_variables"]
    provider.submit(job)
    env = job_puts(fake)[0]["body"]["properties"]["environmentVariables"]
    assert env["NCCL_IB_DISABLE"] == "0" and env["UCX_TLS"] == "tcp" and env["OMP_NUM_THREADS"] == "1"


def test_spot_on_a_dedicated_cluster_is_refused_before_anything_is_created(fake, provider, tmp_path):
    # a cluster's VMs are low priority or dedicated by the cluster (AmlCompute tier, REST vmPriority),
    # not by a job ("Per-job configuration isn't possible": Azure ML's low-priority VM guide)
    with pytest.raises(JobFileError) as info:
        provider.submit(make_job(tmp_path, compute="a100-cluster", extra="spot: true"))
    assert info.value.exit_code == 2 and info.value.field == "spot"
    assert "a100-cluster" in str(info.value) and "dedicated" in str(info.value)
    assert not job_puts(fake) and not fake.calls(ARM, "PUT")
    provider.submit(make_job(tmp_path, compute="spot-cluster", extra="spot: true"))
    [put] = job_puts(fake)
    assert put["body"]["properties"]["computeId"].endswith("/computes/spot-cluster")
    assert "jobTier" not in (put["body"]["properties"].get("queueSettings") or {})  # serverless compute's setting


def test_an_accelerator_the_cluster_does_not_have_is_refused_before_anything_is_created(fake, provider, tmp_path):
    with pytest.raises(JobFileError) as info:
        provider.submit(make_job(tmp_path, compute="a100-cluster",
                                 extra="resources: {accelerator: H100, gpus_per_node: 8}"))
    assert info.value.exit_code == 2 and info.value.field == "resources.accelerator"
    assert "a100-cluster" in str(info.value) and "Standard_ND96asr_v4" in str(info.value)
    assert not job_puts(fake)
    provider.submit(make_job(tmp_path, compute="a100-cluster",
                             extra="resources: {accelerator: A100, gpus_per_node: 8}"))
    assert len(job_puts(fake)) == 1


def test_status_maps_azures_states(fake, provider, tmp_path):
    run = provider.submit(make_job(tmp_path))
    name = run.id.rsplit("/", 1)[1]
    for raw, state in [("NotStarted", State.PENDING), ("Queued", State.PENDING), ("Preparing", State.STARTING),
                       ("Running", State.RUNNING), ("Finalizing", State.RUNNING), ("Completed", State.SUCCEEDED),
                       ("Failed", State.FAILED), ("Canceled", State.CANCELLED), ("SomethingNew", State.UNKNOWN)]:
        fake.jobs[name]["properties"]["status"] = raw
        status = run.status()
        assert (status.state, status.raw_state) == (state, raw)
    assert status.nodes == 2 and status.name == "digits-ddp" and status.created_at == 1735787045.0
    assert status.message == f"https://ml.azure.com/runs/{name}?wsid=fake"
    with pytest.raises(JobNotFound, match="cloudtrain list -p azure"):
        provider.status(f"{SUB}/{RG}/{WSNAME}/no-such-job")


def test_logs_follow_until_the_job_ends(fake, provider, tmp_path):
    run = provider.submit(make_job(tmp_path))
    name = run.id.rsplit("/", 1)[1]
    log0, log1 = "user_logs/std_log_process_0.txt", "user_logs/std_log_process_1.txt"
    fake.script[name] = [
        ("Preparing", {}),
        ("Running", {log0: "epoch 1\n", log1: "node 1 up\n"}),
        ("Running", {log0: "epoch 2\ntest_acc"}),          # a line still being written
        ("Completed", {log0: "uracy 0.95\n"}),
    ]
    lines = list(run.logs(follow=True))
    assert lines == ["[std_log_process_0] epoch 1\n", "[std_log_process_1] node 1 up\n",
                     "[std_log_process_0] epoch 2\n", "[std_log_process_0] test_accuracy 0.95\n"]
    assert run.status().state is State.SUCCEEDED
    # without -f: what is there now, once; system logs are not user output
    text = "".join(run.logs())
    assert text.count("test_accuracy 0.95") == 1 and "system log line" not in text
    discovery = fake.calls("fakeregion.api.azureml.ms", "GET", "/discovery")
    assert discovery and discovery[0]["auth"] is None


def test_cancel_is_idempotent(fake, provider, tmp_path):
    run = provider.submit(make_job(tmp_path))
    name = run.id.rsplit("/", 1)[1]
    fake.jobs[name]["properties"]["status"] = "Running"
    assert run.cancel().state is State.CANCELLED
    assert len(fake.calls(ARM, "POST", f"/jobs/{name}/cancel")) == 1
    assert fake.calls(ARM, "GET", f"/operations/cancel-{name}")  # the LRO was followed to its end
    assert run.cancel().state is State.CANCELLED
    assert len(fake.calls(ARM, "POST", "/cancel")) == 1  # an ended job is left alone


def test_list_shows_cloudtrains_jobs_of_the_configured_workspace(fake, provider, tmp_path, monkeypatch):
    run = provider.submit(make_job(tmp_path))
    fake.jobs["someone-elses"] = dict(json.loads(json.dumps(next(iter(fake.jobs.values())))), name="someone-elses")
    fake.jobs["someone-elses"]["properties"]["tags"] = {}
    (tmp_path / "config.json").write_text(json.dumps({"subscription_id": SUB, "resource_group": RG,
                                                      "workspace_name": WSNAME}))
    monkeypatch.chdir(tmp_path)
    [listed] = provider.list()
    assert listed.handle == run.handle and listed.state is State.PENDING


def test_platform_errors_carry_the_code_and_request_id(fake, provider, tmp_path):
    fake.failures[("PUT", "/jobs/")] = (403, "AuthorizationFailed", "the client has no write access to jobs")
    with pytest.raises(PlatformError) as info:
        provider.submit(make_job(tmp_path))
    message = str(info.value)
    assert info.value.exit_code == 3 and info.value.request_id == "fake-request-0001"
    assert "403 AuthorizationFailed: the client has no write access to jobs" in message
    assert message.endswith("(request id fake-request-0001)") and "AzureML Data Scientist" in message


def test_a_workspace_needs_all_three_names_or_a_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    provider = get_provider("azure", credential=FakeCredential())
    with pytest.raises(BadInput, match="config.json"):
        provider.list()
    with pytest.raises(BadInput, match="all of providers.azure.subscription_id"):
        provider.ml_client(SUB, None, "ws")


def test_cli_submit_follows_then_status_and_cancel(fake, tmp_path):
    """``cloudtrain`` itself, in subprocesses, with the loopback transport plugged into the provider."""
    job = make_job(tmp_path)
    log0 = "user_logs/std_log_process_0.txt"
    fake.default_script = [("Running", {log0: "epoch 1 loss 0.5\n"}), ("Running", {}),
                           ("Completed", {log0: "test_accuracy 0.95\n"})]
    env = {"PYTHONPATH": f"{ROOT / 'tests' / 'support'}:{ROOT / 'tests'}", "CT_AZURE_FAKE_PORT": str(fake.port),
           "CLOUDTRAIN_PLUGINS": "ct_fakeone.plugin,doubles.azure_loopback", "CLOUDTRAIN_DISABLE_PLUGINS": "azure"}
    proc = run_cli("submit", "-p", "azure", job.source.path, env=env, cwd=tmp_path, check=0)
    assert proc.stdout.splitlines()[-2:] == ["epoch 1 loss 0.5", "test_accuracy 0.95"]
    handle = re.search(r"submitted (azure://\S+)", proc.stderr).group(1)
    name = handle.rsplit("/", 1)[1]
    assert handle == f"azure://{SUB}/{RG}/{WSNAME}/{name}" and name in fake.jobs
    status = json.loads(run_cli("status", handle, "-o", "json", env=env, check=0).stdout)
    assert status["state"] == "SUCCEEDED" and status["raw_state"] == "Completed" and status["nodes"] == 2
    assert "SUCCEEDED" in run_cli("cancel", handle, env=env, check=0).stdout
    assert not fake.calls(ARM, "POST", "/cancel")  # an ended job is left alone


def test_a_credential_that_cannot_sign_in_says_how_to(fake, tmp_path):
    from azure.core.exceptions import ClientAuthenticationError

    class NoLogin:
        def get_token(self, *scopes, **kwargs):
            raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")

    provider = get_provider("azure", credential=NoLogin(), client_kwargs={"transport": fake.transport()})
    with pytest.raises(PlatformError, match="az login") as info:
        provider.status(f"{SUB}/{RG}/{WSNAME}/some-job")
    assert info.value.exit_code == 3 and not fake.requests
