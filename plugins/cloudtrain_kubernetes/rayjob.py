"""A ``ray`` job as a KubeRay ``RayJob`` (``ray.io/v1``), for ``providers.kubeflow.ray: rayjob``
and ``providers.volcano.ray: rayjob``: what Ray users run on a cluster that serves KubeRay.

Pure functions over plain dicts, like ``manifests``.  The sources, KubeRay v1.7.0
(ray-project/kuberay, tests/data/crds/README.md):

- ``ray-operator/apis/ray/v1/rayjob_types.go``: ``RayJobSpec`` (``entrypoint``,
  ``rayClusterSpec``, ``shutdownAfterJobFinishes``, ``backoffLimit``: "Each retry creates a new
  RayCluster", ``activeDeadlineSeconds``) and ``RayJobStatus`` (``jobStatus``: Ray's own job
  status, ``jobDeploymentStatus``: KubeRay's, ``reason``, ``message``, ``dashboardURL``);
- ``ray-operator/controllers/ray/rayjob_controller.go``: a RayJob is ``Complete`` once the Ray job
  is terminal (and, in K8sJobMode, its submitter finished), ``Failed`` with reason ``AppFailed``
  when the Ray job FAILED: the job's success is the driver's (the entrypoint's exit status);
- ``ray-operator/controllers/ray/common/pod.go`` (BuildPod): KubeRay runs ``ray start`` in the
  first container of every pod itself; a container ``command``/``args`` it is given runs before,
  joined by ``&&`` (``args = cmd && ulimit ...; ray start ...``), which is where the pods put the
  launcher on ``PYTHONPATH`` and unpack the shipped code;
- ``ray-operator/controllers/ray/common/job.go`` (BuildJobSubmitCommand): the submitter runs
  ``ray job submit ... -- <entrypoint>`` through bash, and Ray's CLI quotes the words again
  (``shlex.join``, ray 2.60 dashboard/modules/job/cli.py) for the head's ``subprocess.Popen(...,
  shell=True)`` (job_supervisor.py): so the entrypoint is one POSIX-quoted command line.

The head pod is node 0, one worker group of ``nodes - 1`` pods holds the rest (replicas, min and
max all equal: no autoscaling).  The entrypoint is cloudtrain's launcher with ``--type none`` on
the head (the Ray driver: the job's command, once; Ray places its tasks on the cluster), in the
directory where the head pod unpacked the code (``CLOUDTRAIN_WORKDIR``, the head container's own
working directory, exported before ``ray start`` so the driver inherits it).
"""
from __future__ import annotations

import shlex
from typing import Any, Dict, List, Mapping, Optional, Tuple

from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.provider import State
from cloudtrain.transfer.shipping import launcher_path

from . import manifests as m

GROUP, VERSION, PLURAL = "ray.io", "v1", "rayjobs"
RESOURCE = (GROUP, VERSION, PLURAL)
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "RayJob"
OPTION_VALUE = "rayjob"        # providers.<p>.ray: rayjob
WORKER_GROUP = "worker"
# The driver's platform: the launcher in the head pod finds its detector through CLOUDTRAIN_DETECTORS
# (the module ships in the launcher bundle with the kubeflow and volcano detectors).
PLATFORM = "kuberay"
DETECTOR = "cloudtrain_kubernetes.detect:detect_kuberay"
NODES_ENV = "CLOUDTRAIN_KUBERAY_NODES"
WORKDIR_ENV = "CLOUDTRAIN_WORKDIR"
# KubeRay's labels that its Volcano integration reads on the RayJob (operator run with
# --batch-scheduler=volcano; ray-operator/controllers/ray/batchscheduler/volcano/
# volcano_scheduler.go QueueNameLabelKey, utils/constant.go RayPriorityClassName): the PodGroup of
# the whole cluster gets that queue and priority class.
VOLCANO_QUEUE_LABEL = "volcano.sh/queue-name"
PRIORITY_CLASS_LABEL = "ray.io/priority-class-name"

# status.jobDeploymentStatus (rayjob_types.go JobDeploymentStatus; "" is JobDeploymentStatusNew),
# and STOPPED, Ray's own jobStatus of a job stopped with `ray job stop` (a Complete RayJob).
STATES = {"New": State.PENDING, "Waiting": State.PENDING, "Suspending": State.PENDING, "Suspended": State.PENDING,
          "Initializing": State.STARTING, "Retrying": State.STARTING, "Running": State.RUNNING,
          "Complete": State.SUCCEEDED, "STOPPED": State.CANCELLED,
          "Failed": State.FAILED, "ValidationFailed": State.FAILED}


def wanted(job: JobSpec, option: Optional[str]) -> bool:
    """Is this job a RayJob?  A ``ray`` job with the option ``ray: rayjob`` (other types ignore it)."""
    return option == OPTION_VALUE and job.distribution.type == "ray"


def pod_prep(options: m.ManifestOptions) -> str:
    """What every pod's Ray container runs before KubeRay's ``ray start``: the launcher on
    ``PYTHONPATH``, this directory remembered (the driver runs there), the code unpacked."""
    steps = ["export " + launcher_path(m.LAUNCHER_DIR), f'export {WORKDIR_ENV}="$PWD"']
    unpack = m.unpack_step(options)
    if unpack:
        steps.append(unpack)
    return " && ".join(steps)


def driver_argv(job: JobSpec, options: m.ManifestOptions) -> List[str]:
    """The Ray driver: cloudtrain's launcher (``--type none``, one process) running the job's
    command in the head pod's working directory."""
    args = job.launch_args()
    args[args.index("--type") + 1] = "none"
    launch = [options.python, "-m", "cloudtrain.launch", "--platform", PLATFORM, *args, "--", *job.argv]
    script = f'cd "${WORKDIR_ENV}" || exit 1; export {launcher_path(m.LAUNCHER_DIR)}; exec "$@"'
    return ["/bin/sh", "-c", script, "cloudtrain-driver", *launch]


def entrypoint(job: JobSpec, options: m.ManifestOptions) -> str:
    """``spec.entrypoint``: the driver as one quoted command line, which the submitter's bash and
    the head's shell both read back to the same words; escaped for the kubelet, which expands
    ``$(VAR)`` in the submitter container's args where KubeRay puts it (``m.kubelet_verbatim``)."""
    return m.kubelet_verbatim(shlex.join(driver_argv(job, options)))


def _pod(job: JobSpec, options: m.ManifestOptions, bundle: Mapping[str, str], role: str) -> dict:
    extra = {"CLOUDTRAIN_DETECTORS": f"{PLATFORM}={DETECTOR}", NODES_ENV: str(job.distribution.nodes)}
    c = m.container(job, options, f"ray-{role}", [], extra_env=extra)
    del c["command"]
    c["args"] = [pod_prep(options)]
    return m.pod_template(job, options, role, [c], bundle)


def labels(options: m.ManifestOptions, volcano: bool) -> Dict[str, str]:
    """The queue's labels: Kueue's (kubeflow with queue_scheduler kueue: Kueue's RayJob
    integration reads the same labels as for the training operator's kinds), else KubeRay's
    Volcano labels."""
    if not volcano:
        return m.kueue_labels(options)
    out = {}
    if options.queue:
        out[VOLCANO_QUEUE_LABEL] = options.queue
    if options.priority_class:
        out[PRIORITY_CLASS_LABEL] = options.priority_class
    return out


def ray_job(job: JobSpec, options: m.ManifestOptions, bundle: Mapping[str, str], volcano: bool) -> dict:
    d = job.distribution
    cluster: Dict[str, Any] = {"headGroupSpec": {"rayStartParams": {}, "template": _pod(job, options, bundle, "head")}}
    if d.nodes > 1:
        cluster["workerGroupSpecs"] = [{
            "groupName": WORKER_GROUP, "replicas": d.nodes - 1, "minReplicas": d.nodes - 1,
            "maxReplicas": d.nodes - 1, "rayStartParams": {}, "template": _pod(job, options, bundle, "worker")}]
    spec: Dict[str, Any] = {"entrypoint": entrypoint(job, options), "shutdownAfterJobFinishes": True,
                            "backoffLimit": job.max_restarts, "rayClusterSpec": cluster}
    if job.max_runtime:
        spec["activeDeadlineSeconds"] = job.max_runtime
    meta: Dict[str, Any] = {"name": m.object_name(job, options)}
    queue = labels(options, volcano or options.queue_scheduler == "volcano")
    if queue:
        meta["labels"] = queue
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}


def build_rayjob(job: JobSpec, options: m.ManifestOptions, volcano: bool = False,
                 bundle: Optional[Mapping[str, str]] = None) -> List[dict]:
    """``[Secret?, ConfigMap, code?, RayJob]`` for a ``ray`` job."""
    bundle = m.launcher_bundle(options.detector_targets) if bundle is None else bundle
    out = [m.secret_manifest(job, options), m.launcher_configmap(job, options, bundle), m.code_source(job, options),
           m.stamp(ray_job(job, options, bundle, volcano), job, options)]
    return [o for o in out if o is not None]


# -- following -------------------------------------------------------------------------------
def job_state(obj: dict) -> Tuple[str, str]:
    """(raw state, message): KubeRay's ``jobDeploymentStatus`` ("New" while it is empty), or
    Ray's ``STOPPED`` for a Complete job that was stopped; the message is KubeRay's reason and
    message, or Ray's job status while it runs."""
    status = obj.get("status") or {}
    deployment = status.get("jobDeploymentStatus") or "New"
    ray_status = status.get("jobStatus") or ""
    raw = "STOPPED" if deployment == "Complete" and ray_status == "STOPPED" else deployment
    words = [w for w in (status.get("reason"), status.get("message")) if w]
    if not words and ray_status:
        words = [f"Ray job {ray_status}"]
    return raw, ": ".join(words)


def node_count(obj: dict) -> Optional[int]:
    cluster = (obj.get("spec") or {}).get("rayClusterSpec") or {}
    return 1 + sum(int(g.get("replicas", 0)) for g in cluster.get("workerGroupSpecs") or [])
