"""kubeflow-trainer: a job as a Kubeflow Trainer v2 TrainJob, validated against the upstream CRD
(tests/data/crds/trainer.kubeflow.org_trainjobs.v1alpha1.yaml) and checked against the default
runtimes it references (tests/data/runtimes/, kubeflow/trainer manifests/base/runtimes)."""
import json
from pathlib import Path

import pytest
import yaml

from cloudtrain.spec.errors import EXIT_BAD_INPUT
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain_kubernetes import manifests as m
from cloudtrain_kubernetes import trainjob as tj
from conftest import run_cli, write_job
from crd_schemas import crd_validators, validate
from test_manifests import COMBOS, OPTIONS, SECRET_VALUE, TYPES, job_for, launch_args, make_job

RUNTIMES = Path(__file__).resolve().parents[2] / "data" / "runtimes"
NAMED = {"mpi": "mpi-openmpi", "horovod": "horovod", "ps-worker": "tf-ps", "ray": "ray-cluster"}


def runtime_file(name):
    return yaml.safe_load((RUNTIMES / (name.replace("-", "_") + ".yaml")).read_text())


def build(job, runtime=None, **options):
    return tj.build_trainjob(job, {**OPTIONS, **options, "provider": tj.PLATFORM, "platform": tj.PLATFORM},
                             tj.runtime_for(job, runtime))


def trainer_of(objs):
    obj = objs[-1]
    assert (obj["apiVersion"], obj["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    return obj["spec"]


def patches(spec):
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == tj.PATCH_MANAGER
    return {rj["name"]: rj["template"]["spec"]["template"] for rj in
            patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]}


@pytest.mark.parametrize("combo", sorted(COMBOS))
@pytest.mark.parametrize("type_", TYPES)
def test_every_type_renders_valid_against_the_crd_or_is_refused(combo, type_, monkeypatch):
    monkeypatch.setenv("CT_K8S_TEST_SECRET", SECRET_VALUE)
    job = job_for(type_, combo)
    if type_ not in tj.DEFAULT_RUNTIMES:
        with pytest.raises(tj.NoRuntime, match=f"{type_} has no default Kubeflow Trainer runtime"):
            tj.runtime_for(job)
    objs = build(job, NAMED.get(type_))
    for obj in objs:
        validate(obj)
    assert SECRET_VALUE not in json.dumps(objs)
    spec = trainer_of(objs)
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                  "name": tj.DEFAULT_RUNTIMES.get(type_) or NAMED[type_]}
    t = spec["trainer"]
    assert (t["numNodes"], t["numProcPerNode"]) == (job.distribution.nodes, job.procs_per_node)
    args = launch_args(t["command"])[0]
    assert args[:2] == ["--platform", "kubeflow-trainer"] and args[args.index("--type") + 1] == type_
    env = {e["name"]: e for e in t["env"]}
    for name in job.secrets:
        assert env[name] == {"name": name, "valueFrom": {"secretKeyRef": {"name": "digits-secrets", "key": name}}}
    # the controller owns these (kubeflow/trainer pkg/constants: TorchRunReservedEnvNames and
    # MPIReservedEnvNames; its webhook refuses a TrainJob that sets them)
    reserved = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
                "OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_keep_fqdn_hostnames",
                "OMPI_MCA_orte_set_default_slots"}
    assert not reserved & set(env)
    for _name, pod in patches(spec).items():
        assert pod["spec"]["serviceAccountName"] == "trainer" and pod["spec"]["nodeSelector"] == {"gpu": "a100"}
        (c,) = pod["spec"]["containers"]
        # the webhook refuses env patches of the node container: env is spec.trainer.env only
        assert set(c) <= {"name", "volumeMounts", "securityContext"} and c["name"] == "node"


@pytest.mark.parametrize("runtime", [tj.TORCH_RUNTIME, tj.DEEPSPEED_RUNTIME])
def test_the_patches_name_replicated_jobs_and_the_container_of_the_default_runtime(runtime):
    """A strategic-merge patch of a replicated job the runtime lacks would add a broken one
    (kubeflow/trainer pkg/runtime/core/trainingruntime.go mergeRuntimePatches): patch exactly the
    runtime's jobs, and its container named node (constants.Node)."""
    type_ = "deepspeed" if runtime == tj.DEEPSPEED_RUNTIME else "ddp"
    upstream = runtime_file(runtime)["spec"]["template"]["spec"]["replicatedJobs"]
    containers = {rj["name"]: [c["name"] for c in rj["template"]["spec"]["template"]["spec"]["containers"]]
                  for rj in upstream}
    spec = trainer_of(build(make_job(type_, nodes=3)))
    assert sorted(patches(spec)) == sorted(containers)
    assert all("node" in names for names in containers.values())
    # the trainer's command lands in the job labelled trainjob-ancestor-step: trainer (jobset builder.go)
    trainer_jobs = [rj["name"] for rj in upstream
                    if (rj["template"].get("metadata") or {}).get("labels", {}).get(
                        "trainer.kubeflow.org/trainjob-ancestor-step") == "trainer"]
    assert trainer_jobs == (["launcher"] if runtime == tj.DEEPSPEED_RUNTIME else ["node"])
    env = {e["name"]: e.get("value") for e in spec["trainer"]["env"]}
    assert env[tj.RUNTIME_ENV] == runtime and (tj.MPI_ENV in env) == (runtime == tj.DEEPSPEED_RUNTIME)


def test_volumes_resources_and_rdma_go_where_trainer_v2_takes_them():
    job = make_job("ddp", nodes=2, network={"rdma": "on"},
                   resources={"gpus_per_node": 4, "cpus_per_node": 8, "memory_gb": 64, "shm_gb": 16})
    spec = trainer_of(build(job))
    limits = spec["trainer"]["resourcesPerNode"]["limits"]
    assert limits == {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4", "rdma/hca": "1"}
    assert spec["trainer"]["resourcesPerNode"]["requests"] == limits
    pod = patches(spec)["node"]
    (c,) = pod["spec"]["containers"]
    assert c["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert {v["name"] for v in pod["spec"]["volumes"]} == {"cloudtrain-launcher", "dshm"}
    assert next(v for v in pod["spec"]["volumes"] if v["name"] == "dshm")["emptyDir"]["sizeLimit"] == "16Gi"
    assert {mt["mountPath"] for mt in c["volumeMounts"]} == {"/opt/cloudtrain", "/dev/shm"}
    assert pod["metadata"]["labels"][m.LABEL_JOB] == "digits"
    env = {e["name"]: e.get("value") for e in spec["trainer"]["env"]}
    assert env["NCCL_IB_DISABLE"] == "0"


def test_a_named_runtime_and_its_kind():
    job = make_job("mpi", nodes=3)
    spec = trainer_of(tj.build_trainjob(job, None, tj.runtime_for(job, "mpi-openmpi", "TrainingRuntime")))
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": "mpi-openmpi"}
    assert sorted(patches(spec)) == ["launcher", "node"]
    custom = tj.runtime_for(make_job("ddp"), "torch-with-cache", jobs=["node", "cache"])
    assert sorted(patches(trainer_of(tj.build_trainjob(make_job("ddp"), None, custom)))) == ["cache", "node"]


def test_queue_is_a_kueue_label_and_the_job_starts_suspended():
    spec_obj = build(make_job("ddp"), queue="research", priority_class="high")[-1]
    labels = spec_obj["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "research" and labels["kueue.x-k8s.io/priority-class"] == "high"
    assert spec_obj["spec"]["suspend"] is True
    plain = build(make_job("ddp"), queue=None)[-1]
    assert "suspend" not in plain["spec"] and "kueue.x-k8s.io/queue-name" not in plain["metadata"]["labels"]


def test_the_validator_catches_trainjob_violations():
    obj = build(make_job("ddp"))[-1]
    validator = crd_validators("trainer.kubeflow.org")[
        ("trainer.kubeflow.org/v1alpha1", "TrainJob")]
    assert not list(validator.iter_errors(obj))
    for mutate in (
        lambda o: o["spec"]["trainer"].__setitem__("numProcPerNode", "auto"),   # an integer since v2.1
        lambda o: o["spec"].__setitem__("podSpecOverrides", []),                  # removed: runtimePatches
        lambda o: o["spec"]["runtimePatches"][0].pop("manager"),                  # required
        lambda o: o["spec"].pop("runtimeRef"),                                    # required
    ):
        bad = json.loads(json.dumps(obj))
        mutate(bad)
        assert list(validator.iter_errors(bad)), mutate


def test_render_refuses_a_type_without_a_runtime_at_its_line(tmp_path, home):
    path = write_job(tmp_path, """
        name: tfjob
        command: python train.py
        image: tensorflow/tensorflow:2.16.1
        distribution:
          type: ps-worker
          nodes: 3
        """)
    proc = run_cli("render", "-p", "kubeflow-trainer", path)
    assert proc.returncode == EXIT_BAD_INPUT and proc.stdout == ""
    assert (f"{path}:5: distribution.type: kubeflow-trainer: ps-worker has no default Kubeflow Trainer runtime"
            in proc.stderr)
    assert "Trainer v2 has no TensorFlow runtime" in proc.stderr and "providers.kubeflow-trainer.runtime" in proc.stderr
    named = run_cli("render", "-p", "kubeflow-trainer", path, "--set", "providers.kubeflow-trainer.runtime=tf-ps",
                    "-o", "json", check=0)
    assert json.loads(named.stdout)["artifacts"][-1]["content"]["spec"]["runtimeRef"]["name"] == "tf-ps"


def test_provider_render_ships_the_trainjob_detector(tmp_path):
    job = load_job(write_job(tmp_path, """
        name: digits
        command: python train.py
        image: pytorch/pytorch:2.4.0
        distribution: {type: ddp, nodes: 2}
        """))
    rendered = get_provider("kubeflow-trainer").render(job)
    cm = next(a.content for a in rendered.artifacts if a.content["kind"] == "ConfigMap")
    assert "cloudtrain_kubernetes.trainer_detect.py" in cm["data"] and "cloudtrain_kubernetes.detect.py" in cm["data"]
    env = {e["name"]: e.get("value") for e in rendered.artifacts[-1].content["spec"]["trainer"]["env"]}
    assert env["CLOUDTRAIN_DETECTORS"] == "kubeflow-trainer=" + tj.DETECTOR
    command = rendered.artifacts[-1].content["spec"]["trainer"]["command"]
    assert launch_args(command)[0][:2] == ["--platform", "kubeflow-trainer"]




@pytest.mark.parametrize("provider,extra", [("kubeflow-trainer", ()), ("eks", ("--set", "providers.eks.api=trainer"))])
def test_max_restarts_is_refused_at_its_line_not_dropped(tmp_path, home, provider, extra):
    """A TrainJob has no restart field (trainer.kubeflow.org_trainjobs CRD: spec has runtimeRef,
    trainer, initializer, runtimePatches, suspend, managedBy, activeDeadlineSeconds; runtimePatches
    patch only the replicated jobs' pod templates); restarts are the runtime's JobSet
    failurePolicy.maxRestarts, which neither default runtime sets (tests/data/runtimes)."""
    from crd_schemas import crd_validators
    schema = crd_validators("trainer.kubeflow.org")[
        ("trainer.kubeflow.org/v1alpha1", "TrainJob")].schema["properties"]["spec"]
    assert set(schema["properties"]) == {"activeDeadlineSeconds", "initializer", "managedBy", "runtimePatches",
                                         "runtimeRef", "suspend", "trainer"}
    patch_spec = schema["properties"]["runtimePatches"]["items"]["properties"]["trainingRuntimeSpec"][
        "properties"]["template"]["properties"]["spec"]
    assert set(patch_spec["properties"]) == {"replicatedJobs"}
    for runtime in (tj.TORCH_RUNTIME, tj.DEEPSPEED_RUNTIME):
        assert "failurePolicy" not in runtime_file(runtime)["spec"]["template"]["spec"]
    path = write_job(tmp_path, """
        name: digits
        command: python train.py
        image: pytorch/pytorch:2.4.0
        distribution: {type: ddp, nodes: 2}
        max_restarts: 2
        """)
    proc = run_cli("render", "-p", provider, path, *extra)
    assert proc.returncode == EXIT_BAD_INPUT and proc.stdout == ""
    assert f"{path}:5: max_restarts: {provider}: a TrainJob cannot ask for restarts" in proc.stderr
    assert "failurePolicy.maxRestarts" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    ok = run_cli("render", "-p", provider, path, *extra, "--set", "max_restarts=0", check=0)
    assert ok.returncode == 0
