"""Kubeflow Trainer v2: a job as a ``trainer.kubeflow.org/v1alpha1`` ``TrainJob`` (pure).

A TrainJob names a training runtime (``spec.runtimeRef``: a ``ClusterTrainingRuntime`` or a
namespaced ``TrainingRuntime``, a JobSet template) and overrides what the job decides in
``spec.trainer``; the Trainer controller builds the JobSet.  cloudtrain renders:

- ``runtimeRef``: ``torch-distributed`` for ddp and none, ``deepspeed-distributed`` for deepspeed
  (the runtimes a Trainer install ships), or the runtime the provider's options name.  mpi,
  horovod, ps-worker and ray need a named runtime: Trainer v2 has no TensorFlow plugin and its
  generic MPI runtime was removed (kubeflow/trainer c534799d, #2760).
- ``trainer``: ``image``, ``command`` (``cloudtrain launch --platform kubeflow-trainer ...`` in
  the shell that puts the launcher first on the image's ``PYTHONPATH``, as for the other
  Kubernetes providers), which the controller puts in the ``node`` container of the job labelled
  ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``), ``numNodes``, ``numProcPerNode``,
  ``resourcesPerNode`` (GPUs, CPU, memory, RDMA devices) and ``env`` (secrets by ``valueFrom``,
  as for the other Kubernetes providers: the pod's ``PET_*`` are the controller's).
- on an MPI runtime with more than one node (``deepspeed-distributed``; any type but mpi and
  horovod), ``trainer.command`` runs ``trainer_detect``'s fan-out on the launcher pod, the only
  pod that runs it: mpirun over the MPI plugin's hostfile starts the node command (the same node
  shell) once on every node, so every node runs cloudtrain's launcher (``trainer_command``).
- ``runtimePatches`` (Trainer >= 2.2), one entry owned by ``cloudtrain.io/cloudtrain``: what the
  removed ``podSpecOverrides`` used to carry -- the launcher ConfigMap and ``/dev/shm`` volumes
  and their mounts, the RDMA capability, node selector, tolerations, service account, pull
  secrets and cloudtrain's pod labels -- on the replicated jobs that run nodes (``node``; the
  MPI runtimes' ``launcher`` too).  Container ``env`` may not be patched for ``node`` (the
  webhook refuses it), so env goes through ``trainer.env`` only.
- queues: ``kueue.x-k8s.io/queue-name`` / ``kueue.x-k8s.io/priority-class`` labels and
  ``suspend: true`` (Kueue admits the job by resuming it; kubeflow/trainer
  examples/yaml/03-kueue-integration.yaml).

The lifecycle half -- the state table and the pods' label selector -- is here too, so every
provider that submits TrainJobs (``kubeflow-trainer``, ``eks`` with ``api: trainer``) reads them
the same way.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.provider import State

from . import manifests as m

API_VERSION = "trainer.kubeflow.org/v1alpha1"
GROUP = "trainer.kubeflow.org"
RESOURCE = (GROUP, "v1alpha1", "trainjobs")
TORCH_RUNTIME = "torch-distributed"
DEEPSPEED_RUNTIME = "deepspeed-distributed"
DEFAULT_RUNTIMES = {"ddp": TORCH_RUNTIME, "none": TORCH_RUNTIME, "deepspeed": DEEPSPEED_RUNTIME}
# The default runtimes' replicated jobs that run nodes (tests/data/runtimes/): deepspeed-distributed
# is an MPI runtime whose launcher runs the command as node 0 (runLauncherAsNode).
RUNTIME_JOBS = {TORCH_RUNTIME: ("node",), DEEPSPEED_RUNTIME: ("launcher", "node")}
NODE_CONTAINER = "node"       # the container the controller fills from spec.trainer
PATCH_MANAGER = "cloudtrain.io/cloudtrain"
# The labels JobSet puts on the pods, which the Kubeflow SDK's TrainerClient selects them by.
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
TRAINER_PORT = 29500          # PET_MASTER_PORT: constants.ContainerTrainerPort
RUNTIME_ENV = "CLOUDTRAIN_TRAINER_RUNTIME"   # the detector's mark (trainer_detect.RUNTIME)
MPI_ENV = "CLOUDTRAIN_TRAINER_MPI"           # an MPI runtime: the launcher reads the hostfile
NODES_ENV = "CLOUDTRAIN_TRAINER_NODES"       # the job's node count (trainer_detect.NODES)
PLATFORM = "kubeflow-trainer"
DETECTOR = "cloudtrain_kubernetes.trainer_detect:detect_kubeflow_trainer"


@dataclass(frozen=True)
class Runtime:
    """The training runtime a TrainJob runs on, and which of its replicated jobs run nodes."""

    name: str
    kind: str = "ClusterTrainingRuntime"
    jobs: Tuple[str, ...] = ("node",)

    @property
    def mpi(self) -> bool:
        """An MPI runtime: the command runs on the launcher, which mpirun's hostfile lists first."""
        return "launcher" in self.jobs


# A TrainJob has no restart field: its spec is runtimeRef, trainer, initializer, runtimePatches,
# suspend, managedBy and activeDeadlineSeconds, and runtimePatches reach only the replicated jobs'
# metadata and pod templates (trainer.kubeflow.org_trainjobs CRD, /work/shared/schemas/crds;
# kubeflow/trainer pkg/apis/trainer/v1alpha1/trainjob_types.go).  Restarts are the runtime's JobSet
# spec.failurePolicy.maxRestarts (the ClusterTrainingRuntime CRD), which neither default runtime
# sets (tests/data/runtimes): a failed node fails the TrainJob.
NO_RESTARTS = (
    "a TrainJob cannot ask for restarts (its spec has no restart field and its runtimePatches reach "
    "only the pod templates); restarts are the training runtime's JobSet failurePolicy.maxRestarts, which "
    f"{TORCH_RUNTIME} and {DEEPSPEED_RUNTIME} do not set; set max_restarts: 0 and name a runtime of your cluster "
    f"whose failurePolicy.maxRestarts restarts the job (providers.{PLATFORM}.runtime), or use the kubeflow or "
    "volcano provider, which restart the whole job")


class NoRuntime(ValueError):
    """The distribution type has no default runtime and none was named."""


def runtime_for(job: JobSpec, name: Optional[str] = None, kind: str = "ClusterTrainingRuntime",
                jobs: Optional[List[str]] = None) -> Runtime:
    t = job.distribution.type
    name = name or DEFAULT_RUNTIMES.get(t)
    if name is None:
        why = {"ps-worker": "Trainer v2 has no TensorFlow runtime",
               "ray": "Trainer v2 ships no Ray runtime"}.get(t, "the generic MPI runtime was removed from Trainer v2")
        raise NoRuntime(
            f"{t} has no default Kubeflow Trainer runtime ({why}; the defaults are {TORCH_RUNTIME} for ddp and none, "
            f"{DEEPSPEED_RUNTIME} for deepspeed); name a ClusterTrainingRuntime or TrainingRuntime of your cluster "
            f"that runs it with providers.{PLATFORM}.runtime (kubectl get clustertrainingruntimes), or use the "
            "kubeflow provider (training-operator v1)")
    default_jobs = RUNTIME_JOBS.get(name) or (("launcher", "node") if t in ("mpi", "horovod") else ("node",))
    return Runtime(name, kind, tuple(jobs) if jobs else default_jobs)


def _pod_patch(job: JobSpec, options: m.ManifestOptions, bundle: Mapping[str, str], role: str) -> dict:
    """The pod template patch of one replicated job: the shared pod template's volumes and
    scheduling fields, the node container's mounts and capability (no env, no resources)."""
    node = m.container(job, options, NODE_CONTAINER, [], compute=True)
    template = m.pod_template(job, options, role, [node], bundle)
    spec = template["spec"]
    patch_container = {"name": NODE_CONTAINER, "volumeMounts": node["volumeMounts"]}
    if "securityContext" in node:
        patch_container["securityContext"] = node["securityContext"]
    spec["containers"] = [patch_container]
    return template


# The module the launcher pod of an MPI runtime runs to start the node command on every node.
FANOUT_MODULE = "cloudtrain_kubernetes.trainer_detect"


def fans_out(job: JobSpec, runtime: Runtime) -> bool:
    """Does the launcher pod start cloudtrain's launcher on every node?  On an MPI runtime the
    command runs on the launcher pod only; mpi and horovod start their ranks over MPI themselves,
    every other type runs the launcher on each node (deepspeed: DeepSpeed's own per node)."""
    return runtime.mpi and job.distribution.nodes > 1 and job.distribution.type not in ("mpi", "horovod")


def trainer_command(job: JobSpec, options: m.ManifestOptions, runtime: Runtime) -> List[str]:
    """``spec.trainer.command``: the node shell (launcher on ``PYTHONPATH``, the code unpacked,
    then ``cloudtrain launch``); where the launcher pod must drive every node (``fans_out``), the
    launcher pod runs ``trainer_detect``'s mpirun over the hostfile with that node shell as the
    command each node runs (it unpacks the code there too: the node pods' own command is sshd)."""
    node = m.node_shell(m.launch_command(job, options), options=options)
    if not fans_out(job, runtime):
        return node
    return m.node_shell([options.python, "-m", FANOUT_MODULE, "--python", options.python, "--", *node])


def train_job(job: JobSpec, options: m.ManifestOptions, runtime: Runtime, bundle: Mapping[str, str]) -> dict:
    d = job.distribution
    name = m.object_name(job, options)
    image = options.image or job.image
    if not image:
        raise ValueError("the job has no image; set `image` or the provider's image option")
    rdma = m.rdma_enabled(job, options)
    # `--platform` must resolve in the pod, where nothing is installed: the provider's own detector
    detector = options.detector_targets[-1] if options.detector_targets else DETECTOR
    ours = {RUNTIME_ENV: runtime.name, "CLOUDTRAIN_DETECTORS": f"{options.platform or PLATFORM}={detector}"}
    if runtime.mpi:  # the job's node count: a one-node job's hostfile lists an sshd pod too (trainer_detect.job_hosts)
        ours.update({MPI_ENV: "1", NODES_ENV: str(d.nodes)})
    if m.checkpoint_claim(job):  # mounted by the pod patch (m.container), named here for the trainer
        ours["CLOUDTRAIN_CHECKPOINT_DIR"] = m.CHECKPOINT_MOUNT
    env = m.env_list(job, options, {**m.storage_mounts(job)[1], **ours}, rdma=rdma)  # the patches mount the claims
    trainer: Dict[str, Any] = {"image": image, "command": trainer_command(job, options, runtime),
                               "numNodes": d.nodes, "numProcPerNode": job.procs_per_node, "env": env}
    resources = m.resources_of(job, options, rdma)
    if resources:
        trainer["resourcesPerNode"] = resources
    jobs = [{"name": rj, "template": {"spec": {"template": _pod_patch(job, options, bundle, rj)}}}
            for rj in runtime.jobs]
    patch = {"manager": PATCH_MANAGER,
             "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}
    spec: Dict[str, Any] = {"runtimeRef": {"apiGroup": GROUP, "kind": runtime.kind, "name": runtime.name},
                            "trainer": trainer, "runtimePatches": [patch]}
    labels = m.kueue_labels(options)
    if options.queue:
        spec["suspend"] = True  # Kueue resumes it when the queue admits it
    if job.max_runtime:  # seconds, from the TrainJob's start
        spec["activeDeadlineSeconds"] = job.max_runtime
    meta: Dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": meta, "spec": spec}


def build_trainjob(job: JobSpec, options=None, runtime: Optional[Runtime] = None,
                   bundle: Optional[Mapping[str, str]] = None) -> List[dict]:
    """``[Secret?, ConfigMap, TrainJob]`` for ``job``; raises ``NoRuntime`` for a type without one."""
    options = m.ManifestOptions.of({"provider": PLATFORM, "platform": PLATFORM} if options is None else options)
    options = options if options.jobset else dataclasses.replace(options, jobset=True)
    runtime = runtime or runtime_for(job)
    bundle = m.launcher_bundle(options.detector_targets) if bundle is None else bundle
    out = [m.secret_manifest(job, options), m.launcher_configmap(job, options, bundle), m.code_source(job, options),
           m.stamp(train_job(job, options, runtime, bundle), job, options)]
    return [o for o in out if o is not None]


# -- following a TrainJob ------------------------------------------------------------------------
# Raw states -> neutral states.  The conditions are the controller's (trainjob_types.go: Suspended,
# Complete, Failed; "Created" was removed before v2.0.0, kubeflow/trainer c3338260, and is kept
# for older objects); Running/Pending are cloudtrain's, from status.jobsStatus (no condition).
STATES = {"Pending": State.PENDING, "Created": State.PENDING, "Suspended": State.PENDING,
          "Running": State.RUNNING, "Complete": State.SUCCEEDED, "Failed": State.FAILED}


def _true(obj: dict) -> Dict[str, dict]:
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}


def queued_message(obj: dict) -> str:
    queue = ((obj.get("metadata") or {}).get("labels") or {}).get(m.KUEUE_QUEUE)
    return f"queued (Kueue LocalQueue {queue})" if queue else "suspended"


def job_state(obj: dict) -> Tuple[str, str]:
    """(raw state, message) of a TrainJob: a final condition first, then Suspended (a job Kueue
    holds is queued), then whether any child Job has pods active."""
    true = _true(obj)
    for final in ("Failed", "Complete"):
        if final in true:
            c = true[final]
            return final, c.get("message") or c.get("reason") or ""
    if "Suspended" in true:
        return "Suspended", queued_message(obj)
    jobs = (obj.get("status") or {}).get("jobsStatus") or []
    if any((j.get("active") or 0) + (j.get("ready") or 0) > 0 for j in jobs):
        return "Running", ""
    if "Created" in true:
        return "Created", true["Created"].get("message") or ""
    other = sorted(t for t in true if t and t not in STATES)
    if other:  # a condition this version does not know: said as it is (UNKNOWN), never as Pending
        c = true[other[0]]
        return other[0], c.get("message") or c.get("reason") or ""
    return "Pending", "waiting for the Trainer controller and JobSet"


def node_count(obj: dict) -> Optional[int]:
    return ((obj.get("spec") or {}).get("trainer") or {}).get("numNodes")


def pod_selector(name: str) -> str:
    """The TrainJob's node pods, as the Kubeflow SDK selects them (kubeflow/sdk
    kubeflow/trainer/constants/constants.py POD_LABEL_SELECTOR, less the initializers)."""
    return f"{JOBSET_NAME}={name},{JOBSET_REPLICATED_JOB} in (launcher, node)"


def node_order(pod: dict) -> Tuple[int, int]:
    """An MPI runtime's launcher is node 0, then the node job's pods by completion index."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    index = labels.get(COMPLETION_INDEX, "0")
    return (0 if labels.get(JOBSET_REPLICATED_JOB) == "launcher" else 1, int(index) if index.isdigit() else 0)
