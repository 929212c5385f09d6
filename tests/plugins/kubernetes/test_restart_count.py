"""``CLOUDTRAIN_RESTART_COUNT`` on the Kubernetes providers (issue 40, "Missing"): the ranks see
the operator's restart count where a pod can read it, and ``validate`` says so where it cannot.

- Volcano writes the Job's retry count on every pod it creates, the annotation
  ``volcano.sh/job-retry-count`` (volcano-sh/volcano >= v1.11.0, pkg/controllers/job/
  job_controller_util.go createJobPod; batch/v1alpha1/labels.go JobRetryCountKey), which the
  RestartJob action increments (pkg/controllers/job/state/running.go): the pods read it through
  the downward API (``metadata.annotations['<key>']``) and the detector maps it.
- The training operator counts restarts in the pods' status only (training-operator v1.9.0
  pkg/core/job.go PastBackoffLimit sums containerStatuses[].restartCount) and labels pods with
  their replica type and index only (pkg/controller.v1/common/pod.go); the downward API cannot
  read container statuses (Kubernetes docs, "Downward API", fieldRef's fields): a warning."""
import json
import os
import subprocess
import sys
import warnings

import pytest

from cloudtrain.input.loading import job_from_dict
from cloudtrain.extend.plugins import get_provider
from cloudtrain.spec.errors import CloudtrainWarning
from cloudtrain_kubernetes.detect import detect_volcano, volcano_environment

ANNOTATION_REF = {"fieldRef": {"fieldPath": "metadata.annotations['volcano.sh/job-retry-count']"}}


def job(provider, dist="ddp", nodes=2, max_restarts=2, **options):
    return job_from_dict({"name": "rc", "command": "python train.py", "image": "img:1", "max_restarts": max_restarts,
                          "distribution": {"type": dist, "nodes": nodes},
                          "providers": {provider: {"namespace": "team-a", **options}}})


def volcano_job(**kw):
    return get_provider("volcano").render(job("volcano", **kw)).artifacts[-1].content


@pytest.mark.parametrize("dist", ["ddp", "mpi", "ray", "none"])
def test_every_volcano_pod_reads_the_retry_count_annotation(dist):
    tasks = volcano_job(dist=dist)["spec"]["tasks"]
    for task in tasks:
        env = task["template"]["spec"]["containers"][0]["env"]
        assert {"name": "CLOUDTRAIN_VOLCANO_RETRY_COUNT", "valueFrom": ANNOTATION_REF} in env, task["name"]


def test_the_volcano_detector_maps_the_retry_count():
    env = volcano_environment([("master", 1), ("worker", 1)], 1, ["rc-master-0", "rc-worker-0"], 29500)
    assert detect_volcano({**env, "CLOUDTRAIN_VOLCANO_RETRY_COUNT": "2"}).env["CLOUDTRAIN_RESTART_COUNT"] == "2"
    # an older Volcano writes no annotation: the downward API gives "", and nothing is made up
    assert "CLOUDTRAIN_RESTART_COUNT" not in detect_volcano({**env, "CLOUDTRAIN_VOLCANO_RETRY_COUNT": ""}).env


def test_a_rank_started_by_the_launcher_sees_volcanos_retry_count(tmp_path):
    """The launcher run as a restarted Volcano pod runs it (the env the rendered container gets,
    the annotation's value put where the kubelet puts it): the rank's environment has the count."""
    container = volcano_job(dist="none")["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    literal = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    pod = volcano_environment([("master", 1), ("worker", 1)], 0, ["rc-master-0", "rc-worker-0"], 29500)
    env = {**os.environ, **literal, **pod, "CLOUDTRAIN_VOLCANO_RETRY_COUNT": "3"}
    env.pop("CLOUDTRAIN_RESTART_COUNT", None)
    probe = "import json, os; print(json.dumps({'k': os.environ.get('CLOUDTRAIN_RESTART_COUNT')}))"
    proc = subprocess.run([sys.executable, "-m", "cloudtrain.launch", "--platform", "volcano", "--type", "none", "--",
                           sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"k": "3"}


@pytest.mark.parametrize("dist", ["ddp", "mpi"])
def test_kubeflow_with_restarts_warns_that_the_count_is_not_readable(dist):
    with pytest.warns(CloudtrainWarning, match=r"max_restarts.*CLOUDTRAIN_RESTART_COUNT is not set"):
        get_provider("kubeflow").validate(job("kubeflow", dist=dist))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CloudtrainWarning)
        get_provider("kubeflow").validate(job("kubeflow", dist=dist, max_restarts=0))   # no restarts: silent
        get_provider("volcano").validate(job("volcano", dist=dist))                      # volcano's pods read it
