"""The built-in providers' doubles, handed to cloudtrain.testing's lifecycle contract
(``@double(name)`` factories: a provider pointed at its platform's double on 127.0.0.1, a job, and
the handles that set the job's raw state and write its log).

Loaded by tests/conftest.py (the repository's test run) or with ``-p doubles.contract``::

    pytest --pyargs cloudtrain.testing -p doubles.contract
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Sequence

from cloudtrain.testing import ProviderDouble, double, no_double

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits-ddp"

no_double("local", "runs the job on this machine: tests/e2e runs real jobs through its whole lifecycle")
no_double("docker", "runs the job in Docker on this machine: tests/e2e runs real containers")
no_double("ec2", "its double (moto + SSM commands run as subprocesses) needs the node script run per test: "
                 "tests/plugins/aws/test_aws_ec2.py")
no_double("slurm", "its lifecycle runs against a real Slurm (one slurmctld, two slurmd on 127.0.0.1): "
                   "tests/plugins/slurm/test_slurm_cluster.py; a double could only set states written here")
no_double("fakeone", "the test plugin: its jobs are local processes (tests/core)")


def job(name: str, options: Dict[str, object], code: str = str(EXAMPLE)):
    from cloudtrain.input.loading import job_from_dict
    return job_from_dict({"name": "contract-life", "code": code, "command": "python train.py --epochs 1",
                          "image": "registry.example/train:1", "distribution": {"type": "ddp", "nodes": 2},
                          "providers": {name: options}})


def env(values: Dict[str, str], request) -> None:
    """Set these variables for the test (through its monkeypatch)."""
    monkeypatch = request.getfixturevalue("monkeypatch")
    for key, value in values.items():
        monkeypatch.setenv(key, value)


# -- TI-ONE: its API (tione_double; the code is in COS already: code_source) -------------------
@double("tione")
def tione(request):
    from tencentcloud.common.credential import Credential
    from cloudtrain_tione.provider import TioneProvider
    from doubles.tione_double import SECRET_ID, SECRET_KEY, FakeTione
    with FakeTione() as fake:
        provider = TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY), endpoint=fake.url, poll=0,
                                  region="ap-shanghai")  # the region list() looks in

        def set_state(job_id: str, raw: str) -> None:
            task = fake.tasks[job_id.rsplit("/", 1)[1]]
            task["script"], task["step"] = ["RUNNING", raw], 1  # it ran (its pods logged), now it is raw

        def write_log(job_id: str, lines: Sequence[str]) -> None:
            for i, line in enumerate(lines):
                fake.add_log(job_id.rsplit("/", 1)[1], 0, line, seconds=i)

        options = {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST",
                   "code_source": "cos://train-1250000000/code/contract/"}
        yield ProviderDouble(provider, lambda: job("tione", options), set_state, write_log)
    assert not fake.bad_requests, fake.bad_requests


# -- ModelArts (Standard): its API (modelarts_double) and OBS (obs_double) ------------------------
@double("modelarts")
def modelarts(request):
    from cloudtrain.transfer import objectstore
    from cloudtrain.extend.plugins import get_provider
    from doubles.modelarts_double import AK, PROJECT, SK, FakeModelArts
    from doubles.obs_double import ObsDouble
    objectstore.forget_uploads()
    tmp = request.getfixturevalue("tmp_path")
    with ObsDouble(AK, SK) as obs, FakeModelArts() as fake:
        obs.create_bucket("bkt")
        env({"HOME": str(tmp), "HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK,
             "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT, "HUAWEICLOUD_SDK_REGION": "cn-north-4",
             "HUAWEICLOUD_SDK_REGION_MODELARTS_CN_NORTH_4": fake.url,
             "HUAWEICLOUD_SDK_REGION_OBS_CN_NORTH_4": obs.endpoint}, request)
        provider = get_provider("modelarts", poll=0)

        def set_state(job_id: str, raw: str) -> None:
            fake.set_phase(job_id.split("/")[1], raw)

        def write_log(job_id: str, lines: Sequence[str]) -> None:
            training = job_id.split("/")[1]
            for task in fake.jobs[training]["status"]["tasks"]:
                fake.log(training, task, "".join(line + "\n" for line in lines))

        options = {"region": "cn-north-4", "code_store": "obs://bkt/team", "flavor_id": "modelarts.vm.cpu.8u"}
        yield ProviderDouble(provider, lambda: job("modelarts", options), set_state, write_log)


# -- SageMaker: moto in server mode behind aws_double -------------------------------------------
_AWS = {}
# SageMaker's TrainingJobStatus values; every other raw state is a SecondaryStatus of InProgress
SAGEMAKER_STATUSES = {"InProgress", "Completed", "Failed", "Stopping", "Stopped", "Deleting"}


def aws_server(request):
    """One moto server for the session (it takes seconds to start)."""
    if "server" not in _AWS:
        from doubles.aws_double import AwsDouble
        _AWS["server"] = AwsDouble().start()
        request.config.add_cleanup(lambda: _AWS.pop("server").stop())
    return _AWS["server"]


@double("sagemaker")
def sagemaker(request):
    from cloudtrain.extend import plugins
    aws = aws_server(request).fresh(request.getfixturevalue("monkeypatch"), "ct-bucket")
    provider = plugins.get_provider("sagemaker", poll=0, **aws.clients())

    def set_state(job_id: str, raw: str) -> None:
        status, _, secondary = raw.partition("/")
        if not secondary:
            secondary_only = raw in provider.states and raw not in SAGEMAKER_STATUSES
            status, secondary = ("InProgress", raw) if secondary_only else (raw, raw)
        aws.set_training(job_id.split("/")[1], status, secondary)

    def write_log(job_id: str, lines: Sequence[str]) -> None:
        aws.emit_logs(job_id.split("/")[1], "algo-1", list(lines))

    options = {"role_arn": "arn:aws:iam::123456789012:role/train", "output_s3": "s3://ct-bucket/runs",
               "region": "us-east-1"}
    return ProviderDouble(provider, lambda: job("sagemaker", options), set_state, write_log)


# -- Azure ML: the loopback transport into azure_double -----------------------------------------
@double("azure")
def azure(request):
    from cloudtrain.extend.plugins import get_provider
    from doubles.azure_double import FakeAzure, FakeCredential
    sub, rg, ws = "00000000-0000-0000-0000-000000000000", "rg", "ws"
    fake = FakeAzure(sub, rg, ws).start()
    # the workspace list() looks in: config.json in the working directory, as Azure's CLI writes it
    (Path.cwd() / "config.json").write_text(json.dumps({"subscription_id": sub, "resource_group": rg,
                                                          "workspace_name": ws}))
    provider = get_provider("azure", credential=FakeCredential(), client_kwargs={"transport": fake.transport()}, poll=0)

    def set_state(job_id: str, raw: str) -> None:
        name = job_id.rsplit("/", 1)[1]
        fake.script[name] = []
        fake.jobs[name]["properties"]["status"] = raw

    def write_log(job_id: str, lines: Sequence[str]) -> None:
        name = job_id.rsplit("/", 1)[1]
        fake.logs.setdefault(name, {})["user_logs/std_log_process_0.txt"] = "".join(line + "\n" for line in lines)

    options = {"subscription_id": sub, "resource_group": rg, "workspace": ws, "compute": "gpu-cluster"}
    try:
        yield ProviderDouble(provider, lambda: job("azure", options), set_state, write_log)
    finally:
        fake.stop()
    assert not fake.crashes, fake.crashes


# -- Kubernetes (kubeflow, volcano, kubeflow-trainer, modelarts-lite with a kubeconfig, eks): the
#    loopback API server (kube_double); eks finds it through DescribeCluster (moto) --------------
def kube_double(name: str, request, make_provider=None, token=None, options=None):
    from cloudtrain.extend.plugins import get_provider
    from doubles.kube_double import TOKEN, FakeKube
    tmp = request.getfixturevalue("tmp_path")
    env({"CLOUDTRAIN_POLL_SECONDS": "0", "CLOUDTRAIN_HOME": str(tmp / "ct-home")}, request)
    with FakeKube(token=token or TOKEN) as fake:
        if make_provider is None:
            config = fake.kubeconfig(tmp / "kubeconfig")
            env({"KUBECONFIG": config}, request)  # the cluster list() looks in
            provider = get_provider(name)
        else:  # eks: the cluster of the job's options, its token a presigned STS call
            config, provider = None, make_provider(fake)

        def set_state(job_id: str, raw: str) -> None:
            ns, job_name = job_id.split("/")
            with fake.lock:
                fake._job(ns, job_name)["status"] = {}  # the one state now, none of the earlier ones
            fake.set_state(ns, job_name, raw)

        def write_log(job_id: str, lines: Sequence[str]) -> None:
            ns, job_name = job_id.split("/")
            pods = fake.start_pods(ns, job_name)
            fake.log(ns, pods[0], *lines)

        settings = options or {"kubeconfig": config, "namespace": "team-a"}
        yield ProviderDouble(provider, lambda: job(name, settings, code="."), set_state, write_log)


@double("kubeflow")
def kubeflow(request):
    yield from kube_double("kubeflow", request)


@double("volcano")
def volcano(request):
    yield from kube_double("volcano", request)


@double("kubeflow-trainer")
def kubeflow_trainer(request):
    yield from kube_double("kubeflow-trainer", request)


@double("modelarts-lite")
def modelarts_lite(request):
    yield from kube_double("modelarts-lite", request)


@double("eks")
def eks(request):
    from cloudtrain_aws.eks import EksProvider
    from doubles.aws_double import REGION, eks_token_ok, session
    aws = aws_server(request)
    aws.reset(services=("eks", "sts"))

    def make_provider(fake):
        aws.eks_cluster("train", fake.url)
        return EksProvider(eks=aws.client("eks"), session=session())

    yield from kube_double("eks", request, make_provider, token=eks_token_ok,
                           options={"cluster": "train", "region": REGION, "namespace": "ml"})
