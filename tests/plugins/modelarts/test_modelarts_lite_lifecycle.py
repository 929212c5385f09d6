"""modelarts-lite: submit, status, logs, cancel and list through the real ``kubernetes`` client
against the loopback API server (tests/doubles/kube_double.py), and the pool's kubeconfig
fetched with the real ``huaweicloudsdkcce`` client from a loopback CCE endpoint."""
import json

import pytest

from cloudtrain.spec.errors import PlatformError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain.providers.provider import State
from conftest import write_job
from doubles.kube_double import FakeKube
from doubles.modelarts_double import AK, PROJECT, SK, FakeModelArts

SECRET = "hf_lite-secret-value-6204"
JOB = """
name: npu-ddp
command: python train.py --epochs 1
image: swr.cn-southwest-2.myhuaweicloud.com/team/pt-npu:1
distribution: {{type: ddp, nodes: 3}}
resources: {{gpus_per_node: 8}}
secrets: {{HF_TOKEN: {{from_env: CT_LITE_SECRET}}}}
providers:
  modelarts-lite:
    namespace: train
{options}
"""


@pytest.fixture
def kube(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "0")  # every status() reads the cluster
    with FakeKube() as fake:
        fake.config_path = fake.kubeconfig(tmp_path / "kubeconfig")
        yield fake


@pytest.fixture
def cce(monkeypatch, tmp_path):
    with FakeModelArts() as fake:
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.setenv("HUAWEICLOUD_SDK_AK", AK)
        monkeypatch.setenv("HUAWEICLOUD_SDK_SK", SK)
        monkeypatch.setenv("HUAWEICLOUD_SDK_PROJECT_ID", PROJECT)
        monkeypatch.setenv("HUAWEICLOUD_SDK_REGION_CCE_CN_SOUTHWEST_2", fake.url)  # the SDK's endpoint override
        yield fake


def submit(tmp_path, monkeypatch, options):
    monkeypatch.setenv("CT_LITE_SECRET", SECRET)
    job = load_job(write_job(tmp_path, JOB.format(options=options)))
    provider = get_provider("modelarts-lite")
    return provider, provider.submit(job)


def test_lifecycle_with_a_kubeconfig(tmp_path, kube, monkeypatch, home):
    provider, run = submit(tmp_path, monkeypatch, f"    kubeconfig: {kube.config_path}")
    assert run.handle == "modelarts-lite://train/npu-ddp"
    job = kube.find("jobs", "train", "npu-ddp")
    assert job["metadata"]["labels"]["ring-controller.cce"] == "ascend-1980"
    assert job["spec"]["plugins"]["configmap1980"] == ["--rank-table-version=v2"]
    assert kube.find("secrets", "train", "npu-ddp-secrets")["stringData"] == {"HF_TOKEN": SECRET}
    assert SECRET not in json.dumps(job)
    launcher = kube.find("configmaps", "train", "npu-ddp-launcher")
    assert "cloudtrain_modelarts.detect.py" in launcher["data"]
    assert launcher["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]

    assert run.status().state is State.PENDING
    pods = kube.start_pods("train", "npu-ddp")
    assert pods == ["npu-ddp-worker-0", "npu-ddp-worker-1", "npu-ddp-worker-2"]
    status = run.status()
    assert (status.state, status.nodes) == (State.RUNNING, 3)
    kube.log("train", "npu-ddp-worker-1", "rank 0/3 on node 0", "test_accuracy 0.97")
    assert "[node1] test_accuracy 0.97\n" in list(run.provider.logs(run.id))
    kube.finish("train", "npu-ddp", "Completed")
    assert run.status().state is State.SUCCEEDED
    monkeypatch.setenv("KUBECONFIG", kube.config_path)  # list looks at the current context
    assert [j.handle for j in get_provider("modelarts-lite").list()] == [run.handle]


def test_submit_again_attaches_and_cancel_deletes(tmp_path, kube, monkeypatch, home):
    _, run = submit(tmp_path, monkeypatch, f"    kubeconfig: {kube.config_path}")
    _, again = submit(tmp_path, monkeypatch, f"    kubeconfig: {kube.config_path}")
    assert again.handle == run.handle and kube.count("POST", "/jobs$") == 1
    kube.start_pods("train", "npu-ddp")
    assert run.cancel().state is State.CANCELLED
    assert kube.find("jobs", "train", "npu-ddp") is None
    assert run.cancel().state is State.CANCELLED   # idempotent
    assert kube.count("DELETE", "/jobs/npu-ddp$") == 1


def test_a_failed_pod_fails_the_job_with_its_exit_code(tmp_path, kube, monkeypatch, home):
    _, run = submit(tmp_path, monkeypatch, f"    kubeconfig: {kube.config_path}")
    kube.start_pods("train", "npu-ddp")
    kube.finish("train", "npu-ddp", "Aborted", exit_codes={"npu-ddp-worker-2": 3})
    status = run.status()
    assert (status.state, status.exit_code) == (State.FAILED, 3)


def test_kubeconfig_from_cce_cluster_certificate(tmp_path, kube, cce, monkeypatch, home):
    """Without a kubeconfig, the pool's CCE cluster gives one (a client certificate): the
    provider asks CCE once, keeps it in memory only, and talks to the server it names."""
    cce.clusters["c0ffee-cluster"] = kube.url
    monkeypatch.setenv("CT_LITE_SECRET", SECRET)
    job = load_job(write_job(tmp_path, JOB.format(options="    cluster_id: c0ffee-cluster\n    cert_days: 2")))
    provider = get_provider("modelarts-lite")
    with pytest.raises(PlatformError, match="401"):
        # the loopback API server wants a bearer token, not CCE's client certificate: the request
        # reaching it, refused, proves where the kubeconfig pointed the client
        provider.submit(job)
    assert cce.requests == [("POST", f"/api/v3/projects/{PROJECT}/clusters/c0ffee-cluster/clustercert",
                             {"duration": 2})]
    assert kube.count("GET", "/namespaces/train/jobs/npu-ddp") == 1
    target = provider.target(provider.options(job))
    assert target == {"kubeconfig": None, "context": None, "region": "cn-southwest-2", "cluster_id": "c0ffee-cluster",
                      "project_id": None, "cert_days": 2}
    assert provider.api_client(target).configuration.host == kube.url
    assert cce.count("POST", "clustercert") == 1   # one certificate per provider and cluster
    kubeconfig = provider.cce_kubeconfig(target)
    assert kubeconfig["users"][0]["user"] == {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}
    assert kubeconfig["current-context"] == "internal" and "Port-ID" not in kubeconfig


def test_cce_errors_are_platform_errors(tmp_path, kube, cce, monkeypatch, home):
    with pytest.raises(PlatformError, match=r"CCE refused create_kubernetes_cluster_cert of cluster nope: "
                                            r"CCE.01404001: The cluster does not exist \(HTTP 404\).*request id req-"):
        submit(tmp_path, monkeypatch, "    cluster_id: nope")
