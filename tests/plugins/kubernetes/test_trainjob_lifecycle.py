"""kubeflow-trainer: submit, status, logs, cancel and list of a TrainJob through the real
``kubernetes`` client against the loopback API server (tests/doubles/kube_double.py), which
plays the Trainer controller and JobSet: conditions Suspended/Complete/Failed as
kubeflow/trainer's trainjob_controller.go and jobset plugin set them, pods labelled as JobSet
labels them (jobset.sigs.k8s.io/jobset-name, replicatedjob-name, batch.kubernetes.io/job-completion-index)."""
import json
from urllib.parse import unquote

import pytest

from cloudtrain.spec.errors import PlatformError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain.providers.provider import State
from cloudtrain.runtime.store import Store
from conftest import run_cli
from test_kube_lifecycle import SECRET, job_file, kube  # noqa: F401 (the fake API server fixture)

P = "kubeflow-trainer"


def submit(tmp_path, kube, monkeypatch, extra="", **kw):
    monkeypatch.setenv("CT_KUBE_SECRET", SECRET)
    job = load_job(job_file(tmp_path, kube, P, extra=extra, **kw))
    p = get_provider(P)
    return p, p.submit(job)


def test_submit_creates_the_trainjob_its_secret_and_launcher(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch)
    assert run.handle == "kubeflow-trainer://team-a/kjob"
    assert kube.count("POST", r"^/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs$") == 1
    job = kube.find("trainjobs", "team-a", "kjob")
    assert job["spec"]["runtimeRef"]["name"] == "torch-distributed" and job["spec"]["trainer"]["numNodes"] == 2
    assert kube.find("secrets", "team-a", "kjob-secrets")["stringData"] == {"HF_TOKEN": SECRET}
    assert SECRET not in json.dumps(job)
    for owned in (kube.find("secrets", "team-a", "kjob-secrets"), kube.find("configmaps", "team-a", "kjob-launcher")):
        assert owned["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert Store().recall(run.handle)["kind"] == "TrainJob"


def test_status_from_conditions_and_child_jobs(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch)
    status = run.status()
    assert (status.state, status.raw_state, status.nodes) == (State.PENDING, "Pending", 2)
    kube.start_pods("team-a", "kjob")
    assert (run.status().state, run.status().raw_state) == (State.RUNNING, "Running")
    kube.finish("team-a", "kjob", "Complete", message="jobset completed")
    status = run.status()
    assert (status.state, status.raw_state, status.exit_code) == (State.SUCCEEDED, "Complete", 0)


def test_a_job_kueue_holds_is_pending_and_queued(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, extra="    queue: gpu-queue\n            priority_class: high")
    job = kube.find("trainjobs", "team-a", "kjob")
    assert job["spec"]["suspend"] is True and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    kube.set_state("team-a", "kjob", "Suspended", "TrainJob is suspended")  # the controller, on suspend: true
    status = run.status()
    assert (status.state, status.raw_state) == (State.PENDING, "Suspended")
    assert status.message == "queued (Kueue LocalQueue gpu-queue)"
    kube.start_pods("team-a", "kjob")                                         # admitted: resumed
    assert run.status().state is State.RUNNING


def test_a_failed_node_gives_its_exit_code_and_the_deadline_its_reason(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch)
    pods = kube.start_pods("team-a", "kjob")
    kube.finish("team-a", "kjob", "Failed", exit_codes={pods[1]: 137}, message="TrainJob exceeded its active deadline")
    status = run.status()
    assert (status.state, status.raw_state, status.exit_code) == (State.FAILED, "Failed", 137)
    assert "active deadline" in status.message and "code 137" in status.message


def test_logs_from_the_jobset_pods_in_node_order(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, nodes=3)
    pods = kube.start_pods("team-a", "kjob")
    assert [n.rsplit("-", 1)[0] for n in pods] == ["kjob-node-0-0", "kjob-node-0-1", "kjob-node-0-2"]
    kube.log("team-a", pods[2], "node 2 up")
    kube.log("team-a", pods[0], "node 0 up")
    kube.log("team-a", pods[1], "node 1 up")
    assert "".join(run.logs()).splitlines() == ["[node0] node 0 up", "[node1] node 1 up", "[node2] node 2 up"]
    selectors = [path for method, path in kube.calls if method == "GET" and "/pods?" in path]
    assert unquote(selectors[-1]).endswith("?labelSelector=jobset.sigs.k8s.io/jobset-name=kjob,"
                                           "jobset.sigs.k8s.io/replicatedjob-name in (launcher, node)")


def test_an_mpi_runtime_lists_its_launcher_first(tmp_path, kube, monkeypatch, home):
    p, run = submit(tmp_path, kube, monkeypatch, dist="mpi", nodes=3, extra="    runtime: mpi-openmpi")
    pods = kube.start_pods("team-a", "kjob")
    assert kube.find("trainjobs", "team-a", "kjob")["spec"]["runtimeRef"]["name"] == "mpi-openmpi"
    kube.log("team-a", pods[0], "launcher: mpirun")
    kube.log("team-a", pods[1], "node 0-0 sshd")
    assert "".join(run.logs()).splitlines() == ["[node0] launcher: mpirun", "[node1] node 0-0 sshd"]
    assert [n.rsplit("-", 1)[0] for n in pods] == ["kjob-launcher-0-0", "kjob-node-0-0", "kjob-node-0-1"]


def test_submit_twice_attaches_cancel_deletes_and_list_finds(tmp_path, kube, monkeypatch, home):
    p, first = submit(tmp_path, kube, monkeypatch)
    p, second = submit(tmp_path, kube, monkeypatch)
    assert first.handle == second.handle and kube.count("POST", r"/trainjobs$") == 1
    monkeypatch.setenv("CT_KUBE_SECRET", SECRET)
    with pytest.raises(PlatformError, match="a different TrainJob named kjob already exists"):
        get_provider(P).submit(load_job(job_file(tmp_path, kube, P, nodes=3)))
    monkeypatch.setenv("KUBECONFIG", kube.config_path)
    assert {s.handle: s.state for s in get_provider(P).list()} == {"kubeflow-trainer://team-a/kjob": State.PENDING}
    assert kube.count("GET", r"^/apis/trainer.kubeflow.org/v1alpha1/trainjobs\?labelSelector=") == 1
    kube.start_pods("team-a", "kjob")
    assert first.cancel().state is State.CANCELLED
    assert [path for method, path in kube.calls if method == "DELETE"] == \
        ["/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/kjob"]
    assert kube.find("configmaps", "team-a", "kjob-launcher") is None
    assert first.cancel().state is State.CANCELLED and kube.count("DELETE", "") == 1


def test_cli_status_of_a_queued_job(tmp_path, kube, home):
    path = job_file(tmp_path, kube, P, extra="    queue: gpu-queue")
    env = {"CT_KUBE_SECRET": SECRET, "KUBECONFIG": kube.config_path}
    run_cli("submit", "-p", P, path, "--detach", env=env, check=0)
    kube.set_state("team-a", "kjob", "Suspended", "TrainJob is suspended")
    out = run_cli("status", "kubeflow-trainer://team-a/kjob", env=env, check=0).stdout
    assert "PENDING" in out and "queued (Kueue LocalQueue gpu-queue)" in out
