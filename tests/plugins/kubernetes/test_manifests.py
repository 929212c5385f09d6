"""The kubernetes plugin's manifests validate against the upstream CRD schemas (../shared/schemas/crds)."""
import json

import pytest

from cloudtrain.input.loading import job_from_dict
from conftest import EXAMPLES
from cloudtrain_kubernetes import manifests as m
from conftest import EXAMPLES
# the validators live in tests/support (other plugins' tests use them too); `validate` stays
# importable from here for tests that load this module by path
from crd_schemas import K8sValidator, crd_validators, validate  # noqa: F401

SECRET_VALUE = "s3cr3t-never-rendered-9431"
TYPES = ["ddp", "mpi", "horovod", "deepspeed", "ps-worker", "ray", "none"]


# -- jobs --------------------------------------------------------------------------------------
def make_job(type_="ddp", nodes=3, **extra):
    dist = {"type": type_, "nodes": nodes}
    dist.update(extra.pop("distribution", {}))
    # the digits example as the code (not `.`, the directory pytest runs in: the whole repository,
    # whose archive would not fit a ConfigMap)
    data = {"name": "digits", "command": "python train.py --epochs 5", "image": "pytorch/pytorch:2.4.0",
            "env": {"OMP_NUM_THREADS": "1"}, "distribution": dist,
            "code": str(EXAMPLES / "digits-ddp")}  # not `.`: the repository pytest runs in
    data.update(extra)
    return job_from_dict(data)


COMBOS = {
    "plain": {},
    "gpus": {"resources": {"gpus_per_node": 4, "cpus_per_node": 7.5, "memory_gb": 30}},
    "rdma": {"network": {"rdma": "on"}, "resources": {"gpus_per_node": 8}},
    "restarts": {"max_restarts": 3},
    "min_nodes": {"distribution": {"min_nodes": 2}},
    "secrets": {"secrets": {"HF_TOKEN": {"from_env": "CT_K8S_TEST_SECRET"}}},
    "shm": {"resources": {"shm_gb": 16, "memory_gb": 2.5}},
    "survive": {"max_runtime": "8h", "max_restarts": 2, "storage": {"checkpoint": "pvc://team-ckpt/digits/run-1"}},
    "all": {"resources": {"gpus_per_node": 2, "shm_gb": 8, "cpus_per_node": 4, "memory_gb": 64},
            "network": {"rdma": "on"}, "max_restarts": 2, "distribution": {"min_nodes": 3, "procs_per_node": 3},
            "secrets": {"HF_TOKEN": {"from_env": "CT_K8S_TEST_SECRET"}}},
}
OPTIONS = {"namespace": "ml", "service_account": "trainer", "node_selector": {"gpu": "a100"},
           "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
           "image_pull_secrets": ["regcred"], "queue": "research"}


def job_for(type_, combo):
    extra = json.loads(json.dumps(COMBOS[combo]))
    if type_ == "ps-worker" and combo == "all":
        extra["distribution"]["ps"] = 2
    return make_job(type_, nodes=4 if combo == "all" else 3, **extra)


def workload(objs):
    return objs[-1]


def pods(obj):
    """``{role: (replicas, pod spec)}`` of a Kubeflow job or a Volcano Job."""
    spec = obj["spec"]
    if obj["kind"] == "Job":
        return {t["name"]: (t["replicas"], t["template"]["spec"]) for t in spec["tasks"]}
    replicas = spec.get("pytorchReplicaSpecs") or spec.get("mpiReplicaSpecs") or spec.get("tfReplicaSpecs")
    return {role: (r["replicas"], r["template"]["spec"]) for role, r in replicas.items()}


def launch_args(command):
    """The ``cloudtrain launch`` options of a container command (possibly wrapped in sh -c)."""
    i = command.index("cloudtrain.launch")
    assert command[i - 1] == "-m" and command[i - 2] == "python3"
    rest = command[i + 1:]
    return rest[:rest.index("--")], rest[rest.index("--") + 1:]


BUILDERS = {"kubeflow": m.build_kubeflow, "volcano": m.build_volcano}


@pytest.mark.parametrize("provider", sorted(BUILDERS))
@pytest.mark.parametrize("combo", sorted(COMBOS))
@pytest.mark.parametrize("type_", TYPES)
def test_every_manifest_passes_the_crd_schemas(provider, combo, type_, monkeypatch):
    monkeypatch.setenv("CT_K8S_TEST_SECRET", SECRET_VALUE)
    job = job_for(type_, combo)
    objs = BUILDERS[provider](job, {**OPTIONS, "provider": provider})
    for obj in objs:
        validate(obj)
        assert obj["metadata"]["namespace"] == "ml"
    text = json.dumps(objs)
    assert SECRET_VALUE not in text
    kinds = [o["kind"] for o in objs]
    assert kinds == (["Secret"] if job.secrets else []) + ["ConfigMap", kinds[-1]]
    for _role, (count, spec) in pods(workload(objs)).items():
        assert count >= 1
        assert spec["serviceAccountName"] == "trainer" and spec["nodeSelector"] == {"gpu": "a100"}
        assert spec["imagePullSecrets"] == [{"name": "regcred"}] and spec["tolerations"]
        for c in spec["containers"]:
            env = {e["name"]: e for e in c["env"]}
            assert "PYTHONPATH" not in env  # prepended in the command instead (issue 21 #1)
            for name in job.secrets:  # by reference only
                assert env[name] == {"name": name, "valueFrom": {"secretKeyRef": {
                    "name": "digits-secrets", "key": name}}}


# -- what each builder produces ------------------------------------------------------------------
def test_ddp_is_a_pytorchjob_master_plus_workers():
    obj = workload(m.build_kubeflow(make_job("ddp", nodes=3, distribution={"procs_per_node": 2})))
    assert (obj["apiVersion"], obj["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    spec = obj["spec"]
    assert {k: v["replicas"] for k, v in spec["pytorchReplicaSpecs"].items()} == {"Master": 1, "Worker": 2}
    assert spec["nprocPerNode"] == "2" and "elasticPolicy" not in spec
    assert spec["runPolicy"]["backoffLimit"] == 0
    c = spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert c["name"] == "pytorch" and c["ports"][0]["name"] == "pytorchjob-port"
    args, argv = launch_args(c["command"])
    assert args[:2] == ["--type", "ddp"] and argv == ["python", "train.py", "--epochs", "5"]
    one = workload(m.build_kubeflow(make_job("ddp", nodes=1)))
    assert list(one["spec"]["pytorchReplicaSpecs"]) == ["Master"]


def test_elastic_policy_from_restarts_or_a_node_range():
    spec = workload(m.build_kubeflow(make_job("ddp", nodes=4, max_restarts=2)))["spec"]
    assert spec["elasticPolicy"]["minReplicas"] == 4 and spec["elasticPolicy"]["maxReplicas"] == 4
    assert "maxRestarts" not in spec["elasticPolicy"]  # whole-job restarts: backoffLimit
    assert spec["runPolicy"]["backoffLimit"] == 2
    assert spec["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
    spec = workload(m.build_kubeflow(make_job("ddp", nodes=4, distribution={"min_nodes": 2})))["spec"]
    assert spec["elasticPolicy"]["minReplicas"] == 2
    c = spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert launch_args(c["command"])[0][-2:] == ["--min-nodes", "2"]


def test_mpi_and_horovod_are_mpijobs():
    for t in ("mpi", "horovod"):
        obj = workload(m.build_kubeflow(make_job(t, nodes=3, resources={"gpus_per_node": 4})))
        assert (obj["apiVersion"], obj["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
        spec = obj["spec"]
        assert spec["slotsPerWorker"] == 4 and spec["sshAuthMountPath"] == "/root/.ssh"
        assert {k: v["replicas"] for k, v in spec["mpiReplicaSpecs"].items()} == {"Launcher": 1, "Worker": 3}
        launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
        assert launch_args(launcher["command"])[0][:2] == ["--type", t]
        assert "resources" not in launcher  # the launcher is a driver, not a node: no GPUs
        worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        assert "sshd" in " ".join(worker["command"]) and worker["resources"]["limits"]["nvidia.com/gpu"] == "4"


def test_the_mpijob_launcher_waits_for_the_workers_sshd_itself():
    """Issue 21 #8.  ``launcherCreationPolicy: WaitForWorkersReady`` first appears in mpi-operator
    v0.5.0 (kubeflow/mpi-operator commit f8d815c "Run workers first and wait for them (#484)",
    deploy/v2beta1/mpi-operator.yaml); v0.4.0's CRD -- the one seed 003 installs (line 20) --
    lacks it, so its structural schema prunes the field, and v0.4.0's controller
    (pkg/controller/mpi_job_controller.go) creates the launcher at once.  The launcher therefore
    waits itself: the operator's hostfile lists the workers, and its cloudtrain launch waits for
    each one's sshd (port 22) before mpirun."""
    from cloudtrain.launch import plans
    obj = workload(m.build_kubeflow(make_job("mpi", nodes=2)))
    assert obj["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"  # honoured from v0.5.0 on
    launcher = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in launcher["env"]}
    assert env[plans.SSH_WAIT] == "22"
    workers = ["digits-worker-0.digits.ml.svc", "digits-worker-1.digits.ml.svc"]
    from cloudtrain.launch.topology import Topology
    topo = Topology(platform="kubeflow", num_nodes=2, master_addr=workers[0], hosts=workers)
    s = plans.Settings(distribution="mpi", command=["python", "t.py"])
    assert plans.plan(topo, s, env).wait_ports == [(workers[0], 22), (workers[1], 22)]
    assert plans.plan(topo, s, {}).wait_ports == []
    # Volcano: pods start at their own pace, node 0 waits for the others' sshd the same way
    vc = pods(workload(m.build_volcano(make_job("mpi", nodes=2))))
    for _, spec in vc.values():
        assert {"name": plans.SSH_WAIT, "value": "22"} in spec["containers"][0]["env"]


def test_ps_worker_is_a_tfjob():
    obj = workload(m.build_kubeflow(make_job("ps-worker", nodes=5, distribution={"ps": 2})))
    assert (obj["apiVersion"], obj["kind"]) == ("kubeflow.org/v1", "TFJob")
    specs = obj["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"PS": 2, "Worker": 3}
    c = specs["PS"]["template"]["spec"]["containers"][0]
    assert c["name"] == "tensorflow" and launch_args(c["command"])[0] == [
        "--type", "ps-worker", "--nproc-per-node", "1", "--ps", "2"]


@pytest.mark.parametrize("type_", ["deepspeed", "ray", "none"])
def test_deepspeed_ray_none_run_the_launcher_in_a_pytorchjob(type_):
    obj = workload(m.build_kubeflow(make_job(type_, nodes=3)))
    assert obj["kind"] == "PyTorchJob" and "elasticPolicy" not in obj["spec"]
    for _role, (_count, spec) in pods(obj).items():
        assert launch_args(spec["containers"][0]["command"])[0][:2] == ["--type", type_]


@pytest.mark.parametrize("type_,tasks", [
    ("ddp", [("master", 1), ("worker", 3)]), ("deepspeed", [("master", 1), ("worker", 3)]),
    ("none", [("master", 1), ("worker", 3)]), ("ray", [("head", 1), ("worker", 3)]),
    ("mpi", [("launcher", 1), ("worker", 3)]), ("horovod", [("launcher", 1), ("worker", 3)]),
    ("ps-worker", [("ps", 1), ("worker", 3)])])
def test_volcano_job_tasks_and_policies(type_, tasks):
    obj = workload(m.build_volcano(make_job(type_, nodes=4), {"queue": "research", "provider": "volcano"}))
    spec = obj["spec"]
    assert obj["apiVersion"] == "batch.volcano.sh/v1alpha1" and obj["kind"] == "Job"
    assert [(t["name"], t["replicas"]) for t in spec["tasks"]] == tasks
    assert spec["minAvailable"] == 4 and spec["queue"] == "research" and spec["schedulerName"] == "volcano"
    assert spec["plugins"]["svc"] == ["--publish-not-ready-addresses=true"] and spec["plugins"]["env"] == []
    assert ("ssh" in spec["plugins"]) == (type_ in ("mpi", "horovod"))
    assert spec["maxRetry"] == 0 and {"event": "PodFailed", "action": "AbortJob"} in spec["policies"]
    completes = [t["name"] for t in spec["tasks"]
                 if {"event": "TaskCompleted", "action": "CompleteJob"} in t.get("policies", [])]
    expected = {"mpi": ["launcher"], "horovod": ["launcher"], "ray": ["head"], "ps-worker": ["worker"]}.get(type_, [])
    assert completes == expected
    for t in spec["tasks"]:
        c = t["template"]["spec"]["containers"][0]
        assert launch_args(c["command"])[0][:2] == ["--type", type_]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["CLOUDTRAIN_VOLCANO_TASKS"] == ",".join(n for n, _ in tasks)
        assert t["template"]["spec"]["restartPolicy"] == "Never"


def test_volcano_restarts_and_min_nodes():
    spec = workload(m.build_volcano(make_job("ddp", nodes=4, max_restarts=3, distribution={"min_nodes": 2})))["spec"]
    assert spec["maxRetry"] == 3 and spec["minAvailable"] == 2
    assert {"event": "PodFailed", "action": "RestartJob"} in spec["policies"]


@pytest.mark.parametrize("type_", ["mpi", "deepspeed", "ray", "none"])
def test_only_ddp_starts_a_partial_gang(type_):
    """Only torchrun's rendezvous admits nodes after the start (--nnodes min:max); every other
    type's node list is fixed, so Volcano (minAvailable: the job starts once that many pods are
    scheduled) and the operator's schedulingPolicy wait for all of them."""
    job = make_job(type_, nodes=4, distribution={"min_nodes": 2})
    spec = workload(m.build_volcano(job))["spec"]
    assert spec["minAvailable"] == 4
    kf = workload(m.build_kubeflow(job, {"provider": "kubeflow", "queue_scheduler": "volcano", "queue": "q"}))
    assert kf["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] >= 4  # mpi: the launcher too


# -- resources, RDMA, shm, secrets, names --------------------------------------------------------
def test_gpu_cpu_memory_shm():
    job = make_job("ddp", resources={"gpus_per_node": 2, "cpus_per_node": 1.5, "memory_gb": 2.5, "shm_gb": 4})
    for build in BUILDERS.values():
        for _role, (_count, spec) in pods(workload(build(job))).items():
            c = spec["containers"][0]
            assert c["resources"]["limits"] == {"cpu": "1500m", "memory": "2560Mi", "nvidia.com/gpu": "2"}
            assert c["resources"]["requests"] == c["resources"]["limits"]
            assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
            shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
            assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "4Gi"}
            assert "securityContext" not in c  # no RDMA asked
    spec = pods(workload(m.build_kubeflow(make_job("ddp"))))["Master"][1]
    assert "resources" not in spec["containers"][0]
    assert next(v for v in spec["volumes"] if v["name"] == "dshm")["emptyDir"]["sizeLimit"] == "1Gi"


def test_rdma_resources_capability_and_nccl_env():
    job = make_job("ddp", network={"rdma": "on"}, env={"NCCL_DEBUG": "INFO"})
    spec = pods(workload(m.build_volcano(job)))["master"][1]
    c = spec["containers"][0]
    assert c["resources"]["limits"]["rdma/hca"] == "1"
    assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    assert env["NCCL_IB_DISABLE"] == "0" and env["NCCL_DEBUG"] == "INFO"
    efa = m.build_kubeflow(job, {"rdma_resource": "vpc.amazonaws.com/efa", "rdma_count": 4})
    c = pods(workload(efa))["Master"][1]["containers"][0]
    assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "4"
    assert {"name": "FI_PROVIDER", "value": "efa"} in c["env"]
    # auto: on only when the options name a resource; off: never
    auto = make_job("ddp", network={"rdma": "auto"})
    assert "securityContext" not in pods(workload(m.build_kubeflow(auto)))["Master"][1]["containers"][0]
    auto_rdma = pods(workload(m.build_kubeflow(auto, {"rdma_resource": "rdma/hca"})))["Master"][1]["containers"][0]
    assert "securityContext" in auto_rdma
    off = make_job("ddp", network={"rdma": "off"})
    off_rdma = pods(workload(m.build_kubeflow(off, {"rdma_resource": "rdma/hca"})))["Master"][1]["containers"][0]
    assert "securityContext" not in off_rdma


IMAGE_PYTHONPATH = "/usr/local/Ascend/ascend-toolkit/latest/python/site-packages"


@pytest.mark.parametrize("type_", ["ddp", "ps-worker", "ray", "mpi"])
@pytest.mark.parametrize("provider", sorted(BUILDERS))
def test_the_launcher_is_prepended_to_the_images_pythonpath(provider, type_, tmp_path):
    """Issue 21 #1.  Kubernetes: "Environment variables that you define in a Pod's configuration
    override any environment variables set in the container image" (kubernetes.io, Tasks > Inject
    Data > Define Environment Variables for a Container); seed 001's manifest sets no PYTHONPATH,
    which Ascend/CANN images set in their own ENV.  So no pod sets it: each command puts
    /opt/cloudtrain in front of the image's value, as the tione/azure/modelarts/sagemaker
    commands already do (`${PYTHONPATH:+:$PYTHONPATH}`)."""
    import subprocess
    for role, (_, spec) in pods(workload(BUILDERS[provider](make_job(type_)))).items():
        (c,) = spec["containers"]
        assert "PYTHONPATH" not in {e["name"] for e in c["env"]}, role
        if "cloudtrain.launch" not in c["command"]:
            continue  # an MPIJob worker runs sshd only; its ranks get PYTHONPATH through mpirun -x
        shell, flag, script, name = c["command"][:4]
        assert (shell, flag) == ("/bin/sh", "-c") and script.startswith("export PYTHONPATH=")
        if "ssh" in script:
            continue  # not run here: it would edit this machine's ssh config / start sshd
        # the image's value is kept after the launcher's; without one, the launcher's alone
        for image, expected in ((IMAGE_PYTHONPATH, "/opt/cloudtrain:" + IMAGE_PYTHONPATH), (None, "/opt/cloudtrain")):
            env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": image} if image else {})}
            out = subprocess.run([shell, flag, script, name, "printenv", "PYTHONPATH"], env=env,
                                 capture_output=True, text=True, check=True).stdout
            assert out.strip() == expected, (role, out)
    # the job's own PYTHONPATH (its env) is still the user's to set
    own = BUILDERS[provider](make_job(type_, env={"PYTHONPATH": "/work/lib"}))
    (c,) = pods(workload(own))[next(iter(pods(workload(own))))][1]["containers"]
    assert {"name": "PYTHONPATH", "value": "/work/lib"} in c["env"]


def test_secrets_are_placeholders_and_references_only(monkeypatch):
    monkeypatch.setenv("CT_K8S_TEST_SECRET", SECRET_VALUE)
    job = make_job("mpi", secrets={"HF_TOKEN": {"from_env": "CT_K8S_TEST_SECRET"},
                                   "WANDB_API_KEY": {"from_env": "CT_K8S_TEST_SECRET"}})
    for build in BUILDERS.values():
        objs = build(job)
        assert SECRET_VALUE not in json.dumps(objs)
        secret = objs[0]
        assert secret["kind"] == "Secret" and secret["stringData"] == {"HF_TOKEN": "***", "WANDB_API_KEY": "***"}
        assert "data" not in secret
        for _role, (_count, spec) in pods(workload(objs)).items():
            env = spec["containers"][0]["env"]
            names = {e["name"]: e for e in env}
            assert "value" not in names["HF_TOKEN"]
            assert names["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "HF_TOKEN"
            assert names["CLOUDTRAIN_ENV_NAMES"]["value"] == "HF_TOKEN,OMP_NUM_THREADS,WANDB_API_KEY"


def test_launcher_configmap_holds_the_bundle_and_every_pod_mounts_it():
    objs = m.build_volcano(make_job("ddp"))
    cm = objs[0]
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["name"] == "digits-launcher"
    assert "cloudtrain.launch.main.py" in cm["data"] and "entry.sh" in cm["data"]
    bundle = m.launcher_bundle()
    assert cm["data"]["cloudtrain.launch.plans.py"] == bundle["cloudtrain/launch/plans.py"]
    for _role, (_count, spec) in pods(objs[-1]).items():
        vol = next(v for v in spec["volumes"] if v["name"] == "cloudtrain-launcher")
        assert vol["configMap"]["name"] == "digits-launcher"
        assert {i["path"] for i in vol["configMap"]["items"]} == set(bundle)


def test_labels_hash_and_names():
    job = make_job("ddp")
    a, b = m.build_kubeflow(job), m.build_kubeflow(job)
    assert a == b  # pure and deterministic
    for obj in a:
        assert obj["metadata"]["labels"][m.LABEL_JOB] == "digits"
        assert obj["metadata"]["labels"][m.LABEL_PROVIDER] == "kubeflow"
    changed = m.build_kubeflow(make_job("ddp", nodes=4))
    assert (changed[-1]["metadata"]["annotations"][m.ANNOTATION_HASH]
            != a[-1]["metadata"]["annotations"][m.ANNOTATION_HASH])
    assert workload(m.build_volcano(job))["metadata"]["labels"][m.LABEL_PROVIDER] == "volcano"
    # a 63-character job name is shortened so that "<name>-launcher-<i>" stays a DNS-1123 label
    long = make_job("ddp", nodes=12, name="a" * 60 + "-xy")
    for build in BUILDERS.values():
        objs = build(long)
        for obj in objs:
            validate(obj)
        name = objs[-1]["metadata"]["name"]
        assert len(name + "-launcher-11") <= 63 and m.DNS1123_LABEL.match(name)


def test_options_reject_unknown_keys_and_need_an_image():
    with pytest.raises(ValueError, match="unknown manifest option"):
        m.build_kubeflow(make_job("ddp"), {"namespce": "x"})
    with pytest.raises(ValueError, match="image"):
        m.build_kubeflow(make_job("ddp", image=None))


# -- the validator itself catches violations -----------------------------------------------------
def _errors(obj):
    return list(crd_validators(obj["apiVersion"].partition("/")[0])[(obj["apiVersion"], obj["kind"])].iter_errors(obj))


def test_the_validator_catches_schema_violations():
    vc = workload(m.build_volcano(make_job("ddp")))
    assert not _errors(vc)
    bad = json.loads(json.dumps(vc))
    bad["spec"]["tasks"][1]["replicas"] = -1          # minimum: 0
    assert _errors(bad)
    bad = json.loads(json.dumps(vc))
    bad["spec"]["policies"][0]["event"] = "PodExploded"  # enum
    assert _errors(bad)
    pt = workload(m.build_kubeflow(make_job("ddp")))
    assert not _errors(pt)
    for mutate in (
        lambda o: o["spec"].__setitem__("nprocPerNode", 2),                       # must be a string
        lambda o: o["spec"]["pytorchReplicaSpecs"]["Worker"].__setitem__("replicas", 2 ** 31),  # int32
        lambda o: o["spec"].__setitem__("nprocsPerNode", "2"),                    # unknown field (strict)
        lambda o: o["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"].append(
            {"name": "CLOUDTRAIN_JOB_ID", "value": "x"}),                         # list-map key duplicated
        lambda o: o["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
                  "ports"][0].__setitem__("containerPort", "29500"),  # integer
    ):
        bad = json.loads(json.dumps(pt))
        mutate(bad)
        assert _errors(bad), mutate
    # int-or-string accepts both, preserve-unknown-fields would accept anything
    ok = json.loads(json.dumps(pt))
    c = ok["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    c["resources"] = {"limits": {"cpu": 2, "memory": "1Gi"}}
    assert not _errors(ok)


def test_every_crd_converts():
    for validator in crd_validators().values():
        K8sValidator.check_schema(validator.schema)
    keys = set(crd_validators())
    assert {("kubeflow.org/v1", "PyTorchJob"), ("kubeflow.org/v1", "TFJob"), ("kubeflow.org/v2beta1", "MPIJob"),
            ("batch.volcano.sh/v1alpha1", "Job")} <= keys
