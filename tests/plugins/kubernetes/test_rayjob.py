"""``providers.kubeflow.ray: rayjob`` / ``providers.volcano.ray: rayjob``: a ``ray`` job as a KubeRay
``RayJob`` (issue 40, "Ray on Kubernetes as Ray users run it").

Sources (KubeRay v1.7.0, ray-project/kuberay): the RayJob CRD (tests/data/crds/ray.io_rayjobs.v1.yaml,
unchanged; every render is checked against it as the PyTorchJob renders are), ``ray-operator/apis/
ray/v1/rayjob_types.go`` (the spec's fields; ``jobDeploymentStatus`` and ``jobStatus``),
``controllers/ray/rayjob_controller.go`` (Complete once the Ray job is terminal, Failed with
reason AppFailed when it FAILED), ``controllers/ray/common/job.go`` (the submitter's bash runs
``ray job submit ... -- <entrypoint>``), ``controllers/ray/utils/validation.go`` (a RayJob's name:
DNS-1035, at most 47 characters); Ray 2.60's ``ray job submit`` quotes the entrypoint's words
again (``shlex.join``, dashboard/modules/job/cli.py) and the head runs it with ``shell=True``
(job_supervisor.py)."""
import json
import os
import re
import subprocess
import sys
import warnings

import pytest

from cloudtrain.extend.plugins import get_provider
from cloudtrain.input.loading import job_from_dict, load_job
from cloudtrain.providers.provider import State
from cloudtrain.spec.errors import BadInput, CloudtrainWarning
from crd_schemas import validate
from doubles.kubelet_double import kubelet_expand
from test_kube_lifecycle import SECRET, job_file, kube  # noqa: F401 (the fake API server fixture)

HOSTILE = ["--note", "it's $(HOME) and $$5 `id` \"q\""]


def job(provider, nodes=3, name="rj", max_restarts=0, command=None, **options):
    return job_from_dict({"name": name, "command": command or ["python", "driver.py", *HOSTILE], "image": "ray:2.60",
                          "max_restarts": max_restarts, "distribution": {"type": "ray", "nodes": nodes},
                          "env": {"OMP_NUM_THREADS": "1"},
                          "providers": {provider: {"namespace": "team-a", "ray": "rayjob", **options}}})


def rendered(provider, **kw):
    return get_provider(provider).render(job(provider, **kw)).artifacts


@pytest.mark.parametrize("provider", ["kubeflow", "volcano"])
@pytest.mark.parametrize("nodes", [1, 3])
def test_a_ray_job_renders_a_rayjob_the_kuberay_crd_accepts(provider, nodes):
    objs = [a.content for a in rendered(provider, nodes=nodes)]
    for obj in objs:
        validate(obj)
    ray = objs[-1]
    assert (ray["apiVersion"], ray["kind"]) == ("ray.io/v1", "RayJob")
    spec = ray["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["backoffLimit"] == 0
    cluster = spec["rayClusterSpec"]
    assert cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["name"] == "ray-head"
    workers = cluster.get("workerGroupSpecs", [])
    assert [(g["replicas"], g["minReplicas"], g["maxReplicas"]) for g in workers] == (
        [(nodes - 1,) * 3] if nodes > 1 else [])
    for template in [cluster["headGroupSpec"]["template"]] + [g["template"] for g in workers]:
        c = template["spec"]["containers"][0]
        # KubeRay runs `ray start` itself after the container's args (common/pod.go BuildPod)
        assert "command" not in c and "ray start" not in c["args"][0] and "cloudtrain.launch.unpack" in c["args"][0]
        assert template["metadata"]["labels"]["cloudtrain.io/job"] == "rj"
        assert any(v["name"] == "cloudtrain-launcher" for v in template["spec"]["volumes"])


def test_the_entrypoint_runs_the_command_through_the_launcher_with_every_word_intact(tmp_path):
    """The entrypoint's whole journey, really run: the kubelet's expansion of the submitter's
    args, the submitter's bash, ``ray job submit``'s ``shlex.join``, the head's ``sh -c``, the
    launcher (``--platform kuberay``) in the head's working directory, then the job's command."""
    probe = ("import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(), "
             "'nodes': os.environ['CLOUDTRAIN_NUM_NODES'], 'platform': os.environ.get('CLOUDTRAIN_PLATFORM')}))")
    spec = job("kubeflow", command=[sys.executable, "-c", probe, *HOSTILE], python=sys.executable)
    ray = get_provider("kubeflow").render(spec).artifacts[-1].content
    head = ray["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    pod_env = {e["name"]: e["value"] for e in head["env"] if "value" in e}
    entrypoint = kubelet_expand(ray["spec"]["entrypoint"], {})   # the submitter container's args
    # the submitter's bash parses it, Ray's CLI quotes the words again (shlex.join)
    words = subprocess.run(["bash", "-c", f'"$0" -c "import shlex, sys; print(shlex.join(sys.argv[1:]))" '
                            f'{entrypoint}', sys.executable], capture_output=True, text=True, check=True).stdout
    workdir = tmp_path / "head workdir"
    workdir.mkdir()
    env = {**os.environ, **pod_env, "CLOUDTRAIN_WORKDIR": str(workdir)}
    proc = subprocess.run(["/bin/sh", "-c", words.strip()], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)  # the head's shell=True, in the supervisor's directory
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"argv": HOSTILE, "cwd": str(workdir), "nodes": "3", "platform": "kuberay"}


def test_status_submit_and_cancel_through_the_api(tmp_path, kube, monkeypatch, home):  # noqa: F811
    monkeypatch.setenv("CT_KUBE_SECRET", SECRET)
    path = job_file(tmp_path, kube, "kubeflow", dist="ray", nodes=3, extra="    ray: rayjob")
    p = get_provider("kubeflow")
    run = p.submit(load_job(path))
    assert [path for method, path in kube.calls if method == "POST" and "/rayjobs" in path] == [
        "/apis/ray.io/v1/namespaces/team-a/rayjobs?fieldValidation=Strict"]
    obj = kube.find("rayjobs", "team-a", "kjob")
    assert kube.find("secrets", "team-a", "kjob-secrets")["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    assert SECRET not in json.dumps(obj)
    assert (run.status().state, run.status().raw_state) == (State.PENDING, "New")
    kube.set_state("team-a", "kjob", "Initializing")
    assert run.status().state is State.STARTING
    kube.start_pods("team-a", "kjob")
    status = run.status()
    assert (status.state, status.raw_state, status.nodes) == (State.RUNNING, "Running", 3)
    run.cancel()
    assert kube.count("DELETE", r"^/apis/ray.io/v1/namespaces/team-a/rayjobs/kjob$") == 1
    assert kube.find("rayjobs", "team-a", "kjob") is None and run.status().state is State.CANCELLED


@pytest.mark.parametrize("deployment,state,words", [
    ("Complete", State.SUCCEEDED, ""),              # the driver exited 0: Ray job SUCCEEDED
    ("Failed", State.FAILED, "AppFailed"),          # the driver exited non-zero: Ray job FAILED
    ("Complete/STOPPED", State.CANCELLED, ""),      # `ray job stop`
    ("Retrying", State.STARTING, ""),               # backoffLimit: a new RayCluster
    ("Suspended", State.PENDING, ""),               # Kueue holds it
    ("ValidationFailed", State.FAILED, "")])
def test_kuberays_states(tmp_path, kube, monkeypatch, home, deployment, state, words):  # noqa: F811
    monkeypatch.setenv("CT_KUBE_SECRET", SECRET)
    run = get_provider("volcano").submit(load_job(job_file(tmp_path, kube, "volcano", dist="ray",
                                                           extra="    ray: rayjob")))
    kube.set_state("team-a", "kjob", deployment, "the entrypoint exited with 1" if words else "")
    status = run.status()
    assert status.state is state and words in status.message


def test_max_restarts_is_kuberays_backoff_limit_with_a_warning_on_both_providers():
    for provider in ("kubeflow", "volcano"):
        with pytest.warns(CloudtrainWarning, match="CLOUDTRAIN_RESTART_COUNT is not set on a RayJob"):
            objs = get_provider(provider).render(job(provider, max_restarts=2)).artifacts
        assert objs[-1].content["spec"]["backoffLimit"] == 2
    # without the option, kubeflow still refuses restarts a ray cluster in its pods cannot honour
    pods = job_from_dict({"name": "rj", "command": "python d.py", "image": "ray:2.60", "max_restarts": 2,
                          "distribution": {"type": "ray", "nodes": 2}})
    with pytest.raises(BadInput, match="max_restarts"):
        get_provider("kubeflow").validate(pods)


def test_the_rayjob_name_fits_kuberays_limit():
    name = "a-very-long-ray-training-job-name-that-goes-on-and-on"
    ray = rendered("kubeflow", name=name)[-1].content
    assert len(ray["metadata"]["name"]) <= 47 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", ray["metadata"]["name"])


def test_queues_on_kubeflow_and_volcano():
    kueue = rendered("kubeflow", queue="gpu", priority_class="high")[-1].content["metadata"]["labels"]
    assert kueue["kueue.x-k8s.io/queue-name"] == "gpu" and kueue["kueue.x-k8s.io/priority-class"] == "high"
    volcano = rendered("volcano", queue="gpu", priority_class="high")[-1].content["metadata"]["labels"]
    assert volcano["volcano.sh/queue-name"] == "gpu" and volcano["ray.io/priority-class-name"] == "high"


def test_other_types_ignore_the_option_and_pods_is_the_default():
    ddp = job_from_dict({"name": "d", "command": "python t.py", "image": "i:1", "distribution": {"type": "ddp"},
                         "providers": {"kubeflow": {"ray": "rayjob"}}})
    assert get_provider("kubeflow").render(ddp).artifacts[-1].content["kind"] == "PyTorchJob"
    plain = job_from_dict({"name": "r", "command": "python t.py", "image": "i:1", "distribution": {"type": "ray"}})
    with warnings.catch_warnings():
        warnings.simplefilter("error", CloudtrainWarning)
        assert get_provider("volcano").render(plain).artifacts[-1].content["kind"] == "Job"
