"""kubeflow and volcano: submit, status, logs, cancel and list through the real ``kubernetes``
client, over HTTP, against the loopback API server of tests/doubles/kube_double.py."""
import json
import threading
import sys
import time

import pytest

from cloudtrain.spec.errors import EXIT_PLATFORM, JobNotFound, PlatformError
from cloudtrain.providers.cloud import CloudProvider
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider, get_provider_class
from cloudtrain.providers.provider import State
from cloudtrain.runtime.store import Store
from conftest import run_cli, write_job
from doubles.kube_double import FakeKube

SECRET = "hf_kube-secret-value-91x"


@pytest.fixture
def kube(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "0")  # every status() reads the cluster (the cache has its own test)
    with FakeKube() as fake:
        fake.config_path = fake.kubeconfig(tmp_path / "kubeconfig")
        yield fake


def job_file(tmp_path, kube, provider="kubeflow", dist="ddp", nodes=2, extra=""):
    return write_job(tmp_path, f"""
        name: kjob
        command: python train.py --epochs 1
        image: registry.example/train:1
        distribution: {{type: {dist}, nodes: {nodes}, procs_per_node: 2}}
        env: {{OMP_NUM_THREADS: "1"}}
        secrets: {{HF_TOKEN: {{from_env: CT_KUBE_SECRET}}}}
        providers:
          {provider}:
            kubeconfig: {kube.config_path}
            namespace: team-a
        {extra}
        """)


def submit(tmp_path, kube, monkeypatch, home, provider="kubeflow", **kw):
    monkeypatch.setenv("CT_KUBE_SECRET", SECRET)
    job = load_job(job_file(tmp_path, kube, provider, **kw))
    p = get_provider(provider)
    return p, p.submit(job)


def test_submit_creates_secret_configmap_and_job_owned_by_it(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, home)
    assert run.handle == "kubeflow://team-a/kjob"
    job = kube.find("pytorchjobs", "team-a", "kjob")
    assert job["kind"] == "PyTorchJob" and job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
    secret = kube.find("secrets", "team-a", "kjob-secrets")
    assert secret["stringData"] == {"HF_TOKEN": SECRET}          # the real value reaches the cluster...
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert SECRET not in json.dumps(job)                          # ...only through the Secret
    secret_ref = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "kjob-secrets", "key": "HF_TOKEN"}}}
    assert secret_ref in container["env"]
    for owned in (secret, kube.find("configmaps", "team-a", "kjob-launcher")):
        assert owned["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert Store().recall(run.handle)["kind"] == "PyTorchJob"


def test_status_follows_the_operator_conditions(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, home)
    assert run.status().state is State.PENDING
    kube.set_state("team-a", "kjob", "Created")
    assert run.status().raw_state == "Created"
    kube.start_pods("team-a", "kjob")
    status = run.status()
    assert (status.state, status.raw_state, status.nodes) == (State.RUNNING, "Running", 2)
    kube.finish("team-a", "kjob", "Succeeded")
    status = run.status()
    assert (status.state, status.exit_code) == (State.SUCCEEDED, 0)


@pytest.mark.parametrize("name", ["kubeflow", "volcano", "kubeflow-trainer", "eks", "modelarts-lite"])
def test_every_kubernetes_provider_has_the_cloud_lifecycle_of_core(name):
    """submit, status, cancel and logs are CloudProvider's (docs/plugins.md): a Kubernetes
    provider fills in _find_by_spec, _create, _describe, _to_status, _stop and _log_chunks."""
    cls = get_provider_class(name)
    assert issubclass(cls, CloudProvider)
    for method in ("schedule", "status", "fresh_status", "cancel", "logs"):
        assert getattr(cls, method) is getattr(CloudProvider, method), f"{name} overrides {method}"


def test_status_reads_the_cluster_once_per_poll(tmp_path, kube, monkeypatch, home):
    monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "60")
    p, run = submit(tmp_path, kube, monkeypatch, home)
    reads = kube.count("GET", r"/pytorchjobs/kjob$")
    assert run.status().state is State.PENDING
    kube.start_pods("team-a", "kjob")
    assert run.status().state is State.PENDING                    # the same read, within the poll
    assert kube.count("GET", r"/pytorchjobs/kjob$") == reads + 1
    assert p.fresh_status(run.id).state is State.RUNNING          # a fresh read when it must be
    kube.finish("team-a", "kjob", "Succeeded")
    assert run.cancel().state is State.SUCCEEDED                   # cancel reads afresh: nothing to delete
    assert kube.count("DELETE", "") == 0


def test_a_failed_pod_gives_its_exit_code(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, home)
    kube.start_pods("team-a", "kjob")
    kube.finish("team-a", "kjob", "Failed", exit_codes={"kjob-worker-0": 137}, message="PyTorchJob kjob is failed")
    status = run.status()
    assert (status.state, status.exit_code) == (State.FAILED, 137)
    assert "kjob is failed" in status.message and "code 137" in status.message


def test_logs_per_node_in_node_order(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, home)
    kube.start_pods("team-a", "kjob")
    kube.log("team-a", "kjob-worker-0", "worker says hi")
    kube.log("team-a", "kjob-master-0", "master says hi", "epoch 1")
    assert "".join(run.logs()).splitlines() == ["[node0] master says hi", "[node0] epoch 1", "[node1] worker says hi"]
    # cloudtrain logs --node: one pod's lines; the pod logs tell no rank
    from cloudtrain.runtime.logselect import LogSelection
    from cloudtrain.spec.errors import BadInput
    assert list(p.select_logs(run.id, LogSelection(node=1))) == ["[node1] worker says hi\n"]
    assert list(p.select_logs(run.id, LogSelection(node=0, tail=1))) == ["[node0] epoch 1\n"]
    with pytest.raises(BadInput, match="kubeflow cannot tell ranks apart"):
        p.select_logs(run.id, LogSelection(rank=1))


def test_exec_runs_a_command_in_a_node_pod_through_its_exec_stream(tmp_path, kube, monkeypatch, home, capfdbinary):
    """cloudtrain exec on Kubernetes: the pod's exec subresource (the kubelet's websocket, which the
    double answers by running the command here), its output and its exit code."""
    from cloudtrain.spec.errors import BadInput
    p, run = submit(tmp_path, kube, monkeypatch, home)
    with pytest.raises(BadInput, match="exec needs a running job"):
        p.exec_command(run.id, 0, ["true"], False)
    kube.start_pods("team-a", "kjob")
    kube.set_state("team-a", "kjob", "Running")
    plan = p.exec_command(run.id, 1, [sys.executable, "-c", "import sys; print('in the pod'); "
                                                             "print('to stderr', file=sys.stderr); sys.exit(4)"], False)
    assert plan.argv[:3] == ["pods/exec", "team-a", "kjob-worker-0"]
    assert plan.run() == 4
    got = capfdbinary.readouterr()
    assert got.out == b"in the pod\n" and got.err == b"to stderr\n"
    assert kube.count("GET", r"/namespaces/team-a/pods/kjob-worker-0/exec") == 1
    with pytest.raises(BadInput, match="has nodes 0 to 1"):
        p.exec_command(run.id, 2, ["true"], False)
    with pytest.raises(BadInput, match="kubectl exec -it -n team-a kjob-master-0 -- sh"):
        p.exec_command(run.id, 0, [], True)


def test_logs_follow_streams_until_the_job_ends(tmp_path, kube, monkeypatch, home):
    monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "0.1")
    p, run = submit(tmp_path, kube, monkeypatch, home)
    kube.start_pods("team-a", "kjob")
    kube.log("team-a", "kjob-master-0", "step 1")

    def later():
        time.sleep(0.5)
        kube.log("team-a", "kjob-master-0", "step 2")
        kube.log("team-a", "kjob-worker-0", "worker done")
        time.sleep(0.3)
        kube.finish("team-a", "kjob", "Succeeded")

    threading.Thread(target=later, daemon=True).start()
    got = [line.rstrip("\n") for line in run.logs(follow=True)]
    assert got.index("[node0] step 1") < got.index("[node0] step 2")      # each node's lines in order
    assert sorted(got) == sorted(set(got)) and set(got) == {"[node0] step 1", "[node0] step 2", "[node1] worker done"}
    assert run.status().state is State.SUCCEEDED


def test_submit_twice_attaches_and_a_changed_spec_is_refused(tmp_path, kube, monkeypatch, home):
    p, first = submit(tmp_path, kube, monkeypatch, home)
    p, second = submit(tmp_path, kube, monkeypatch, home)
    assert first.handle == second.handle
    assert kube.count("POST", r"/pytorchjobs$") == 1
    monkeypatch.setenv("CT_KUBE_SECRET", SECRET)
    changed = load_job(job_file(tmp_path, kube, nodes=3))
    with pytest.raises(PlatformError, match=r"a different PyTorchJob named kjob already exists.*cloudtrain cancel kubeflow://team-a/kjob"):
        get_provider("kubeflow").submit(changed)
    assert kube.count("POST", r"/pytorchjobs$") == 1


def test_cancel_deletes_the_job_and_what_it_owns_and_is_idempotent(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, home)
    kube.start_pods("team-a", "kjob")
    status = run.cancel()
    assert status.state is State.CANCELLED
    delete = [path for method, path in kube.calls if method == "DELETE"]
    assert delete == ["/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/kjob"]
    assert kube.find("secrets", "team-a", "kjob-secrets") is None
    assert kube.find("pods", "team-a", "kjob-master-0") is None
    assert run.cancel().state is State.CANCELLED                 # again: nothing more is deleted
    assert kube.count("DELETE", "") == 1


def test_an_ended_job_is_not_deleted_by_cancel(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, home)
    kube.finish("team-a", "kjob", "Succeeded")
    assert run.cancel().state is State.SUCCEEDED
    assert kube.count("DELETE", "") == 0


def test_mpi_and_ps_worker_go_to_their_kinds_and_status_finds_them_without_the_store(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, home, dist="mpi")
    assert kube.count("POST", r"/apis/kubeflow.org/v2beta1/namespaces/team-a/mpijobs$") == 1
    fresh = type(p)(store=Store(tmp_path / "other.db"), api_client=p.api_client({"kubeconfig": kube.config_path}))
    assert fresh.status("team-a/kjob").state is State.PENDING     # found by probing the kinds
    kube.start_pods("team-a", "kjob")
    assert [line for line in fresh.logs("team-a/kjob")] == []
    assert {n for n, _ in kube.pod_names(kube.find("mpijobs", "team-a", "kjob"))} == \
        {"kjob-launcher-0", "kjob-worker-0", "kjob-worker-1"}


def test_list_by_label_across_kinds(tmp_path, kube, monkeypatch, home):
    submit(tmp_path / "a", kube, monkeypatch, home)
    path = job_file(tmp_path / "b", kube, dist="ps-worker", nodes=3).read_text().replace("name: kjob", "name: tfj")
    (tmp_path / "b" / "job.yaml").write_text(path)
    get_provider("kubeflow").submit(load_job(tmp_path / "b" / "job.yaml"))
    # list() uses the default kubeconfig: point KUBECONFIG at the fake
    monkeypatch.setenv("KUBECONFIG", kube.config_path)
    listed = {s.handle: s.state for s in get_provider("kubeflow").list()}
    assert listed == {"kubeflow://team-a/kjob": State.PENDING, "kubeflow://team-a/tfj": State.PENDING}
    listing = r"^/apis/kubeflow.org/v1/tfjobs\?labelSelector=cloudtrain.io(%2F|/)provider(%3D|=)kubeflow"
    assert kube.count("GET", listing) == 1, kube.calls


def test_volcano_lifecycle(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, home, provider="volcano", dist="mpi", nodes=3)
    assert run.handle == "volcano://team-a/kjob"
    job = kube.find("jobs", "team-a", "kjob")
    assert job["apiVersion"] == "batch.volcano.sh/v1alpha1" and set(job["spec"]["plugins"]) == {"svc", "env", "ssh"}
    assert run.status().state is State.PENDING
    pods = kube.start_pods("team-a", "kjob")
    assert pods == ["kjob-launcher-0", "kjob-worker-0", "kjob-worker-1"]
    kube.log("team-a", "kjob-launcher-0", "allreduce ok")
    assert "".join(run.logs()).splitlines() == ["[node0] allreduce ok"]
    kube.finish("team-a", "kjob", "Aborted", exit_codes={"kjob-worker-1": 1})
    status = run.status()
    assert (status.state, status.raw_state, status.exit_code) == (State.FAILED, "Aborted", 1)


def test_unknown_job_and_refused_credentials(tmp_path, kube, monkeypatch, home):
    monkeypatch.setenv("KUBECONFIG", kube.config_path)
    with pytest.raises(JobNotFound, match="no kubeflow job team-a/nope"):
        get_provider("kubeflow").status("team-a/nope")
    kube.token = "rotated"
    with pytest.raises(PlatformError, match=r"401 Unauthorized.*check the kubeconfig's credentials"):
        get_provider("kubeflow").status("team-a/nope")


def test_cli_submit_status_logs_cancel_list(tmp_path, kube, home):
    path = job_file(tmp_path, kube)
    env = {"CT_KUBE_SECRET": SECRET, "KUBECONFIG": kube.config_path}
    proc = run_cli("submit", "-p", "kubeflow", path, "--detach", env=env, check=0)
    assert "kubeflow://team-a/kjob" in proc.stderr + proc.stdout
    kube.start_pods("team-a", "kjob")
    kube.log("team-a", "kjob-master-0", "hello from the master")
    assert "RUNNING" in run_cli("status", "kubeflow://team-a/kjob", env=env, check=0).stdout
    assert "[node0] hello from the master" in run_cli("logs", "kubeflow://team-a/kjob", env=env, check=0).stdout
    assert "kubeflow://team-a/kjob" in run_cli("list", "-p", "kubeflow", env=env, check=0).stdout
    assert "CANCELLED" in run_cli("cancel", "kubeflow://team-a/kjob", env=env).stdout
    for method, _ in kube.calls:
        assert method in ("GET", "POST", "PATCH", "DELETE")
    kube.token = "rotated"
    refused = run_cli("status", "kubeflow://team-a/kjob", env=env)
    assert refused.returncode == EXIT_PLATFORM and "401" in refused.stderr and "Traceback" not in refused.stderr
    assert SECRET not in proc.stdout + proc.stderr
