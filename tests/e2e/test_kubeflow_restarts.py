"""Issue 28 #1: a PyTorchJob's ``max_restarts`` restarts the whole job, for real.

Two local "pods" run exactly what cloudtrain's PyTorchJob render says (the container's
``cloudtrain launch`` command and its env) plus what Kubeflow's training operator (release-1.9)
injects, a real gloo DDP job that saves a checkpoint every epoch.  One pod is killed outright;
as on Kubernetes, only that pod comes back (the operator re-creates or the kubelet restarts a
failed pod, never its peers), and the job must resume from the checkpoint on every worker and
finish.  Every pod is on 127.0.0.1 (this test's DNS: every pod name resolves here).

Under static rendezvous (before the fix) the re-created pod cannot join the running workers: the
surviving pod's job fails too (with gloo at once; with NCCL only at the collective timeout), so
one lost pod costs two restarts of the budget, and ``max_restarts: 1`` ends the job FAILED.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from cloudtrain.input.loading import job_from_dict
from cloudtrain_kubernetes import manifests
from helpers import wait_for
from processes import processes_under

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCHS = 6

TRAIN = textwrap.dedent('''
    """gloo DDP; rank 0 saves {epoch, model} after every epoch and a new attempt resumes from it."""
    import os, sys, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    epochs = int(sys.argv[1])
    folder = os.environ["CLOUDTRAIN_CHECKPOINT_DIR"]
    path = os.path.join(folder, "ckpt.pt")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    start = torch.zeros(1, dtype=torch.long)
    if rank == 0 and os.path.exists(path):
        state = torch.load(path)
        model.module.load_state_dict(state["model"])
        start[0] = state["epoch"]
    dist.broadcast(start, 0)
    for p in model.module.parameters():
        dist.broadcast(p.data, 0)
    with open(os.path.join(folder, "events.log"), "a") as f:
        f.write("start pod=%s world=%d epoch=%d\\n" % (os.environ["POD"], world, int(start)))
    crash = os.environ.get("CRASH_ONCE_AT_EPOCH")
    for epoch in range(int(start), epochs):
        if crash and epoch == int(crash) and rank == 1 and not os.path.exists(os.path.join(folder, "crashed")):
            open(os.path.join(folder, "crashed"), "w").close()
            os._exit(3)   # a worker fails (an exception, an OOM): its pod stays
        for step in range(5):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step(); time.sleep(0.2)
        if rank == 0:
            torch.save({"model": model.module.state_dict(), "epoch": epoch + 1}, path + ".tmp")
            os.replace(path + ".tmp", path)
        dist.barrier()
    if rank == 0:
        with open(os.path.join(folder, "events.log"), "a") as f:
            f.write("done world=%d\\n" % world)
    dist.destroy_process_group()
''')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def operator_env(spec: dict, role: str, index: int) -> dict:
    """What training-operator release-1.9 adds to a PyTorchJob pod's container
    (pkg/controller.v1/pytorch/envvar.go setPodEnv, master.go, elastic.go), the pod names
    <job>-master-0 / <job>-worker-0 resolving to 127.0.0.1 here."""
    port = str(spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"])
    replicas = sum(r["replicas"] for r in spec["pytorchReplicaSpecs"].values())
    rank = index + 1 if role == "Worker" else index            # envvar.go: a Worker's rank is index + 1
    env = {"PYTHONUNBUFFERED": "1",
           "MASTER_PORT": port, "PET_MASTER_PORT": port,        # master.go: the port named pytorchjob-port
           "MASTER_ADDR": "127.0.0.1", "PET_MASTER_ADDR": "127.0.0.1",
           "WORLD_SIZE": str(replicas * int(spec["nprocPerNode"])), "RANK": str(rank), "PET_NODE_RANK": str(rank),
           "PET_NPROC_PER_NODE": spec["nprocPerNode"]}
    elastic = spec.get("elasticPolicy")
    if elastic:   # elastic.go: Generate
        env.update({"PET_RDZV_ENDPOINT": "127.0.0.1:%d" % elastic["rdzvPort"],
                    "PET_RDZV_BACKEND": elastic.get("rdzvBackend", "c10d"),
                    "PET_NNODES": "%d:%d" % (elastic["minReplicas"], elastic["maxReplicas"])})
        if "maxRestarts" in elastic:
            env["PET_MAX_RESTARTS"] = str(elastic["maxRestarts"])
        if "rdzvId" in elastic:
            env["PET_RDZV_ID"] = elastic["rdzvId"]
    else:
        env["PET_NNODES"] = str(replicas)
    return env


class Pod:
    """One pod: the rendered container's command and env, the operator's env, its own directory
    (so that it can be killed whole: every process whose working directory is in it)."""

    def __init__(self, name, argv, env, directory):
        self.name, self.argv, self.env, self.directory = name, argv, env, directory
        self.directory.mkdir()
        self.log = open(directory.parent / (name + ".log"), "ab")
        self.proc = None
        self.starts = 0

    def start(self):
        self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.directory, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.starts += 1

    def kill(self):
        """The node is gone: SIGKILL to every process of the pod, as a node loss or OOM kill does."""
        for pid in processes_under(self.directory):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.proc.wait()


def render_pods(tmp_path, max_restarts, **extra_env):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(TRAIN)
    job = job_from_dict({"name": "restarts", "image": "pytorch/pytorch:2.4.0", "code": str(code),
                         "command": "%s %s %d" % (sys.executable, code / "train.py", EPOCHS),
                         "max_restarts": max_restarts,
                         "distribution": {"type": "ddp", "nodes": 2, "procs_per_node": 1}})
    pytorchjob = manifests.build_kubeflow(job, {"master_port": free_port(), "python": sys.executable})[-1]
    spec = pytorchjob["spec"]
    checkpoints = tmp_path / "checkpoint"   # the claim every attempt's pods mount
    checkpoints.mkdir()
    pods = []
    for role in ("Master", "Worker"):
        container = spec["pytorchReplicaSpecs"][role]["template"]["spec"]["containers"][0]
        command = container["command"]
        launcher = command[command.index("cloudtrain-node") + 1:]   # what `exec "$@"` runs
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDTRAIN_", "PET_"))}
        env.update({e["name"]: e["value"] for e in container["env"] if "value" in e})
        env.update(operator_env(spec, role, 0))
        env.update({"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "core"), os.path.join(ROOT, "plugins")]),
                    "CLOUDTRAIN_CHECKPOINT_DIR": str(checkpoints), "POD": role.lower(),
                    "CLOUDTRAIN_PEER_TIMEOUT": "120", **extra_env})
        pods.append(Pod(role.lower(), launcher, env, tmp_path / role.lower()))
    return spec, pods, checkpoints


def kubelet(pods, backoff_limit, until):
    """restartPolicy OnFailure: a pod whose container fails is started again (only that pod), at
    most ``backoff_limit`` times in all (runPolicy.backoffLimit counts container restarts;
    pkg/core/job.go PastBackoffLimit).  Returns every pod's last exit code."""
    deadline = time.monotonic() + until
    while time.monotonic() < deadline:
        codes = [pod.proc.poll() for pod in pods]
        for pod, code in zip(pods, codes):
            if code not in (None, 0) and sum(p.starts - 1 for p in pods) < backoff_limit:
                pod.start()
                codes = None
                break
        if codes is not None and all(c is not None for c in codes):
            return codes
        time.sleep(0.2)
    return [pod.proc.poll() for pod in pods]


@pytest.mark.timeout(420)
def test_a_killed_pod_rejoins_and_every_worker_resumes_from_the_checkpoint(tmp_path):
    spec, pods, checkpoints = render_pods(tmp_path, max_restarts=1)   # one failure, one restart
    master, worker = pods
    try:
        master.start()
        # on Kubernetes only the master pod's name is the endpoint's, so only it hosts torchrun's
        # c10d store; here every pod is 127.0.0.1, so the master goes first to be the one
        wait_for(lambda: _port_open(int(master.env["MASTER_PORT"])) or master.proc.poll() is not None, timeout=120)
        worker.start()
        wait_for(lambda: (checkpoints / "ckpt.pt").exists(), timeout=180)
        worker.kill()
        worker.start()   # the operator brings back the failed pod, and only that one
        codes = kubelet(pods, spec["runPolicy"]["backoffLimit"], until=240)
    finally:
        for pod in pods:
            if pod.proc and pod.proc.poll() is None:
                pod.kill()
    logs = "\n".join("%s:\n%s" % (p.name, (tmp_path / (p.name + ".log")).read_text(errors="replace")[-3000:])
                     for p in pods)
    events = (checkpoints / "events.log").read_text()
    assert codes == [0, 0], logs
    assert "done world=2" in events, events + logs
    starts = re.findall(r"start pod=(\w+) world=(\d) epoch=(\d+)", events)
    assert {(pod, epoch) for pod, _, epoch in starts if epoch == "0"} == {("master", "0"), ("worker", "0")}
    resumed = {pod for pod, world, epoch in starts if int(epoch) >= 1 and world == "2"}
    # every worker restarted from the checkpoint: the killed pod's and the one that was never killed
    assert resumed == {"master", "worker"}, events
    assert master.starts == 1, "the master pod itself never had to be restarted"


def _port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.timeout(420)
def test_a_failed_worker_restarts_every_worker_from_the_checkpoint(tmp_path):
    """A worker exits 3 at epoch 2 once: torchrun's agents restart every worker of both pods from
    the checkpoint, and no pod has to restart (under static rendezvous the worker's pod failed,
    then the master's, two restarts for one failure)."""
    spec, pods, checkpoints = render_pods(tmp_path, max_restarts=1, CRASH_ONCE_AT_EPOCH="2")
    master, worker = pods
    try:
        master.start()
        wait_for(lambda: _port_open(int(master.env["MASTER_PORT"])) or master.proc.poll() is not None, timeout=120)
        worker.start()
        codes = kubelet(pods, spec["runPolicy"]["backoffLimit"], until=300)
    finally:
        for pod in pods:
            if pod.proc and pod.proc.poll() is None:
                pod.kill()
    logs = "\n".join("%s:\n%s" % (p.name, (tmp_path / (p.name + ".log")).read_text(errors="replace")[-3000:])
                     for p in pods)
    events = (checkpoints / "events.log").read_text()
    assert codes == [0, 0], logs
    assert "done world=2" in events and (checkpoints / "crashed").exists(), events + logs
    starts = re.findall(r"start pod=(\w+) world=(\d) epoch=(\d+)", events)
    assert {pod for pod, world, epoch in starts if epoch == "2" and world == "2"} == {"master", "worker"}, events
    assert master.starts == worker.starts == 1
