"""issue 31 item 4: failover across providers through the loopback doubles answering with the
platforms' own error codes: TI-ONE's fake refuses with ``ResourceInsufficient.QuotaInsufficient``
(tencentcloud tione v20211111 errorcodes.py) and the job runs on SageMaker (moto); SageMaker
refuses with ``ResourceLimitExceeded`` (CreateTrainingJob's documented error) or fails the job
with ``CapacityError`` before it starts, and the job runs on the next; any other error stops."""
import json
import threading
import time

import pytest

from doubles.aws_double import AwsDouble  # noqa: E402
from conftest import run_cli, write_job  # noqa: E402
from doubles.tione_fixtures import fake  # noqa: E402,F401
from doubles.tione_double import SECRET_ID, SECRET_KEY  # noqa: E402

ROLE = "arn:aws:iam::123456789012:role/train"
BUCKET = "ct-bucket"


class RefusingAws(AwsDouble):
    """The AWS double, whose SageMaker answers the next CreateTrainingJob with ``refuse`` =
    (code, message), as SageMaker does (a JSON ``__type`` error, HTTP 400)."""

    refuse = None

    def _on_sagemaker_CreateTrainingJob(self, environ, params):
        if self.refuse:
            code, message = self.refuse
            self.refuse = None
            return self._json_error(400, code, message)
        return super()._on_sagemaker_CreateTrainingJob(environ, params)


@pytest.fixture(scope="module")
def server():
    with RefusingAws() as aws:
        yield aws


@pytest.fixture
def aws(server, monkeypatch):
    server.refuse = None
    return server.fresh(monkeypatch, BUCKET)


def job_file(tmp_path, extra=""):
    (tmp_path / "job").mkdir(exist_ok=True)
    (tmp_path / "job" / "train.py").write_text("print('hi')\n")
    return write_job(tmp_path / "job", f"""
        name: fo
        command: python train.py
        image: img:1
        distribution: {{type: ddp, nodes: 1, procs_per_node: 1}}
        providers:
          tione: {{instance_type: TI.S.LARGE.POST, code_source: "cfs://cfs-1/code"}}
          sagemaker: {{role_arn: "{ROLE}", output_s3: "s3://{BUCKET}/runs"}}
        {extra}
        """)


def env_for(aws, fake, **extra):  # noqa: F811
    return aws.env(CLOUDTRAIN_TIONE_ENDPOINT=fake.url, TENCENTCLOUD_SECRET_ID=SECRET_ID,
                   TENCENTCLOUD_SECRET_KEY=SECRET_KEY, TENCENTCLOUD_REGION="ap-shanghai", **extra)


def test_a_quota_refusal_moves_on_to_the_next_provider_and_the_ledger_says_where(aws, fake, tmp_path, home):  # noqa: F811
    fake.fail("CreateTrainingTask", "ResourceInsufficient.QuotaInsufficient",
              "申请资源超过用户在当前资源组的最大配额限制")
    env = env_for(aws, fake)
    proc = run_cli("submit", "-p", "tione,sagemaker", job_file(tmp_path), "--detach", env=env)
    assert proc.returncode == 0, proc.stderr
    handle = proc.stdout.strip()
    assert handle.startswith("sagemaker://us-east-1/fo-")
    moved = [line for line in proc.stderr.splitlines() if "trying the next provider" in line]
    assert len(moved) == 1 and "tione: ResourceInsufficient.QuotaInsufficient" in moved[0]
    assert "CreateTrainingTask" in fake.actions() and aws.count("CreateTrainingJob") == 1
    row = {j["handle"]: j for j in json.loads(run_cli("list", "-o", "json", env=env, check=0).stdout)}[handle]
    assert row["provider"] == "sagemaker" and row["instance_type"] == "ml.m5.xlarge"
    assert row["tried"] == [moved[0].split("cloudtrain: ", 1)[1].rsplit("; trying", 1)[0]]


def test_any_other_refusal_stops_there(aws, fake, tmp_path, home):  # noqa: F811
    fake.fail("CreateTrainingTask", "InvalidParameterValue.ImageNotFound", "image not found")
    proc = run_cli("submit", "-p", "tione,sagemaker", job_file(tmp_path), "--detach", env=env_for(aws, fake))
    assert proc.returncode == 3, proc.stderr
    assert "InvalidParameterValue.ImageNotFound" in proc.stderr and "trying the next" not in proc.stderr
    assert aws.count("CreateTrainingJob") == 0


def test_sagemaker_resource_limit_exceeded_moves_on_to_tione(aws, fake, tmp_path, home):  # noqa: F811
    aws.refuse = ("ResourceLimitExceeded", "The account-level service limit 'ml.m5.xlarge for training job usage' "
                                           "is 0 Instances, with current utilization of 0 Instances")
    proc = run_cli("submit", "-p", "sagemaker,tione", job_file(tmp_path), "--detach", env=env_for(aws, fake))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("tione://ap-shanghai/")
    assert "sagemaker: ResourceLimitExceeded" in proc.stderr
    assert "CreateTrainingTask" in fake.actions()


def test_a_capacity_failure_before_the_first_instance_starts_moves_on(aws, fake, tmp_path, home):  # noqa: F811
    def fail_it():
        deadline = time.monotonic() + 60
        while not aws.backend("sagemaker").training_jobs and time.monotonic() < deadline:
            time.sleep(0.02)
        name = next(iter(aws.backend("sagemaker").training_jobs))
        aws.set_training(name, "Failed", "Failed",
                         failure="CapacityError: Unable to provision requested ML compute capacity. "
                                 "Please retry using a different ML instance type.")
    player = threading.Thread(target=fail_it)
    player.start()
    proc = run_cli("submit", "-p", "sagemaker,tione", job_file(tmp_path), "--detach", env=env_for(aws, fake))
    player.join()
    assert proc.returncode == 0, proc.stderr
    handle = proc.stdout.strip()
    assert handle.startswith("tione://") and "CapacityError" in proc.stderr
    rows = {j["handle"]: j for j in json.loads(run_cli("list", "-o", "json", env=env_for(aws, fake), check=0).stdout)}
    assert "CapacityError" in rows[handle]["tried"][0]
    assert [j["state"] for j in rows.values() if j["provider"] == "sagemaker"] == ["FAILED"]


def test_validate_and_render_cover_each_candidate_in_order(aws, fake, tmp_path, home):  # noqa: F811
    path = job_file(tmp_path)
    env = env_for(aws, fake)
    out = run_cli("validate", "-p", "sagemaker,tione", path, env=env)
    assert out.returncode == 0, out.stderr
    assert [line.split("(")[1].split(":")[0] for line in out.stdout.splitlines()] == ["sagemaker", "tione"]
    rendered = json.loads(run_cli("render", "-p", "tione,sagemaker", "-o", "json", path, env=env, check=0).stdout)
    assert [r["provider"] for r in rendered] == ["tione", "sagemaker"]
    bad = run_cli("validate", "-p", "sagemaker,tione", path, "--set", "spot=true", "--set",  # tione: no spot in
                  "providers.tione.resource_group=trsg-1", env=env)                        # a resource group
    assert bad.returncode == 2 and "ok (sagemaker" in bad.stdout and "tione" in bad.stderr
    assert sum(aws.calls.values()) == 0 and fake.actions() == []


def test_a_profiles_providers_list_is_the_failover_order(aws, fake, tmp_path, home):  # noqa: F811
    cfg = tmp_path / "config.yaml"
    cfg.write_text("profiles:\n  anywhere: {providers: [tione, sagemaker]}\n")
    fake.fail("CreateTrainingTask", "ResourceInsufficient", "资源不足。")
    proc = run_cli("submit", "--profile", "anywhere", job_file(tmp_path), "--detach",
                   env=env_for(aws, fake, CLOUDTRAIN_CONFIG=str(cfg)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("sagemaker://") and "tione: ResourceInsufficient" in proc.stderr


def test_the_code_table_reads_each_sdks_own_exception():
    from botocore.exceptions import ClientError
    from huaweicloudsdkcore.exceptions.exceptions import ClientRequestException, SdkError
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
    from cloudtrain.spec.errors import PlatformError
    from cloudtrain.orchestrate.failover import is_capacity_refusal

    def wrapped(sdk_error):
        try:
            try:
                raise sdk_error
            except Exception:
                raise PlatformError("the platform refused") from None
        except PlatformError as exc:
            return exc

    ec2 = ClientError({"Error": {"Code": "InsufficientInstanceCapacity", "Message": "no p4d"}}, "RunInstances")
    assert is_capacity_refusal("ec2", wrapped(ec2))
    unauthorized = ClientError({"Error": {"Code": "UnauthorizedOperation"}}, "RunInstances")
    assert not is_capacity_refusal("ec2", wrapped(unauthorized))
    huawei = ClientRequestException(400, SdkError("r", "ModelArts.3976", "No resources are available for the "
                                                                         "selected specification."))
    assert is_capacity_refusal("modelarts", wrapped(huawei))
    assert is_capacity_refusal("tione", wrapped(TencentCloudSDKException("LimitExceeded", "超过配额限制。")))
    no_balance = TencentCloudSDKException("OperationDenied.BalanceInsufficient", "")
    assert not is_capacity_refusal("tione", wrapped(no_balance))
    assert not is_capacity_refusal("tione", PlatformError("no code at all"))


SUB, RG, WS = "00000000-0000-0000-0000-000000000000", "rg", "ws"


@pytest.fixture
def azure_double():
    """The Azure ML double (tests/doubles/azure_double.py) and the environment that points
    the CLI's Azure provider at it (its loopback plugin in place of the real one)."""
    import os
    from conftest import ROOT
    from doubles.azure_double import FakeAzure
    fake_azure = FakeAzure(SUB, RG, WS).start()
    paths = [str(ROOT / "tests" / "support"), str(ROOT / "tests"), os.environ.get("PYTHONPATH")]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, paths)), "CT_AZURE_FAKE_PORT": str(fake_azure.port),
           "CLOUDTRAIN_PLUGINS": "ct_fakeone.plugin,doubles.azure_loopback", "CLOUDTRAIN_DISABLE_PLUGINS": "azure"}
    try:
        yield fake_azure, env
    finally:
        fake_azure.stop()
    assert not fake_azure.crashes


def test_an_azure_quota_refusal_moves_on_to_local(tmp_path, home, azure_double):
    """The Azure ML double answers the job's PUT with ARM's ``QuotaExceeded``; the job then runs
    on this machine."""
    fake_azure, env = azure_double
    fake_azure.failures[("PUT", "/jobs/")] = (
        400, "QuotaExceeded", "Operation could not be completed as it results in exceeding approved "
                              "standardNDSv2Family Cores quota.")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "train.py").write_text("print('ran here')\n")
    path = write_job(tmp_path, f"""
        name: quota
        code: project
        command: python train.py
        image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest
        distribution: {{type: ddp, nodes: 1, procs_per_node: 1}}
        providers:
          azure: {{subscription_id: "{SUB}", resource_group: {RG}, workspace: {WS}, compute: gpu-cluster}}
        """)
    proc = run_cli("submit", "-p", "azure,local", path, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "azure: QuotaExceeded" in proc.stderr and "ran here" in proc.stdout
    assert "submitted local://quota-" in proc.stderr


def test_a_refused_job_runs_on_the_next_provider_at_its_catalog_rate_with_one_call_per_candidate(
        fake, tmp_path, home, azure_double):  # noqa: F811
    """Issue 31's "done when": TI-ONE's fake refuses for quota, Azure's double takes the job
    (A100 x 8: Standard_ND96asr_v4, priced in the shipped catalog), and `list` says where it ran
    and at what rate; the refused candidate cost one create call, and nothing else was asked of it
    (failover adds no round trip of its own)."""
    fake_azure, env = azure_double
    fake.fail("CreateTrainingTask", "ResourceInsufficient.QuotaInsufficient",
              "申请资源超过用户在当前资源组的最大配额限制")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "train.py").write_text("print('hi')\n")
    path = write_job(tmp_path, f"""
        name: priced
        code: project
        command: python train.py
        image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest
        distribution: {{type: ddp, nodes: 2}}
        resources: {{accelerator: A100, gpus_per_node: 8, cpus_per_node: 90, memory_gb: 800}}
        network: {{rdma: off}}
        providers:
          tione: {{resource_group: trsg-1, code_source: "cfs://cfs-1/code"}}
          azure: {{subscription_id: "{SUB}", resource_group: {RG}, workspace: {WS}}}
        """)
    env = dict(env, CLOUDTRAIN_TIONE_ENDPOINT=fake.url, TENCENTCLOUD_SECRET_ID=SECRET_ID,
               TENCENTCLOUD_SECRET_KEY=SECRET_KEY, TENCENTCLOUD_REGION="ap-shanghai")
    proc = run_cli("submit", "-p", "tione,azure", path, "--detach", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    handle = proc.stdout.strip()
    assert handle.startswith("azure://") and "tione: ResourceInsufficient.QuotaInsufficient" in proc.stderr
    assert fake.actions().count("CreateTrainingTask") == 1  # one round trip to the refusing candidate
    assert not [a for a in fake.actions() if a != "CreateTrainingTask" and not a.startswith("Describe")]
    rows = {j["handle"]: j for j in json.loads(run_cli("list", "-o", "json", env=env, cwd=tmp_path,
                                                       check=0).stdout)}
    row = rows[handle]
    assert (row["provider"], row["instance_type"], row["nodes"]) == ("azure", "Standard_ND96asr_v4", 2)
    assert row["currency"] == "USD" and row["rate"] and row["rate"] > 0  # the catalog's sourced rate
    assert row["tried"] and row["tried"][0].startswith("tione: ResourceInsufficient.QuotaInsufficient")
