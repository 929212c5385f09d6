"""The slurm provider against a real Slurm (tests/support/slurm_cluster.py: Debian's slurm-wlm,
one slurmctld and two slurmd on 127.0.0.1, no accounting).  Every state, reason and field read
here is what the real commands printed."""
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cloudtrain.extend.plugins import get_provider
from cloudtrain.input.loading import job_from_dict
from cloudtrain.providers.provider import State
from cloudtrain.providers.request import Placeholder, fill
from cloudtrain.spec.errors import BadInput, JobNotFound, PlatformError
from conftest import EXAMPLES, run_cli
from slurm_cluster import slurm_cluster  # noqa: F401  (the session's real two-node Slurm)

from cloudtrain_slurm.detect import expand_nodelist
from cloudtrain_slurm.provider import SlurmProvider
from cloudtrain_slurm.sdk import SACCT_FIELDS, parse_sacct, parse_scontrol

pytestmark = pytest.mark.slurm


LISTS = ["n1", "n[1-2]", "a[1-3,5],b", "gpu[001-003,010]", "a[1-2]-b[3-4]", "rack[1-2]-node[1-2]", "x,y,z",
         "node-[001-002]", "c[9-11]", "login1,gpu[1-2],cpu[7,9-10]"]


@pytest.mark.parametrize("value", LISTS)
def test_the_node_side_expansion_is_slurms_own(value, slurm_cluster):
    slurm = subprocess.run(["scontrol", "show", "hostnames", value], capture_output=True, text=True, check=True)
    assert expand_nodelist(value) == slurm.stdout.split()


def make_job(tmp_path, command, nodes=2, files=None, **extra):
    code = tmp_path / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "note.txt").write_text("shipped\n")
    for name, text in (files or {}).items():
        (code / name).write_text(text)
    providers = {"slurm": {"workdir": str(tmp_path / "wd"), **extra.pop("slurm", {})}}
    distribution = {"type": "none", "nodes": nodes, **extra.pop("distribution", {})}
    return job_from_dict({"name": extra.pop("name", "sj"), "code": str(code), "command": command,
                          "distribution": distribution, "providers": providers, **extra})


@pytest.fixture
def venv_on_path(monkeypatch):
    """The job's nodes get the submitting shell's environment (sbatch's default): this venv's
    python first, as a user's activated venv would be."""
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])


def wait_for(predicate, what, seconds=120.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"never: {what}")


def squeue_all():
    out = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%T|%j"], capture_output=True, text=True,
                         check=True).stdout
    return [line.split("|") for line in out.splitlines()]


def test_a_two_node_job_runs_and_its_log_and_exit_are_read(slurm_cluster, tmp_path):
    provider = get_provider("slurm")
    run = provider.submit(make_job(tmp_path, ["sh", "-c", "echo node=$SLURM_NODEID of $SLURM_JOB_NUM_NODES; "
                                                           "cat note.txt"]))
    status = run.wait(timeout=180)
    assert status.state == State.SUCCEEDED and status.raw_state == "COMPLETED", status
    assert status.exit_code == 0 and status.nodes == 2
    text = "".join(run.logs())
    assert "node=0 of 2" in text and "node=1 of 2" in text and "shipped" in text
    assert status.created_at and status.started_at and status.ended_at


def test_a_failing_job_is_failed_with_slurms_state(slurm_cluster, tmp_path):
    run = get_provider("slurm").submit(make_job(tmp_path, ["sh", "-c", "exit 3"], nodes=1))
    status = run.wait(timeout=180)
    assert status.state == State.FAILED and status.raw_state == "FAILED", status
    assert status.exit_code not in (None, 0)


def test_cancel_ends_a_running_job_and_a_waiting_one_says_why(slurm_cluster, tmp_path):
    provider = get_provider("slurm")
    marker = "987"
    first = provider.submit(make_job(tmp_path / "a", ["sleep", marker]))
    wait_for(lambda: provider.fresh_status(first.id).state == State.RUNNING, "the first job runs")
    wait_for(lambda: sleepers(marker), "its processes are up")
    # cloudtrain exec: a step of the running job on its second node (srun --jobid --overlap -w)
    step = provider.exec_command(first.id, 1, ["printenv", "SLURMD_NODENAME", "SLURM_JOB_ID"], False)
    done = subprocess.run(step.argv, capture_output=True, text=True, env=step.env, timeout=120)
    assert (done.returncode, done.stdout.split()) == (0, ["n2", first.id]), done
    with pytest.raises(BadInput, match="has nodes 0 to 1"):
        provider.exec_command(first.id, 2, ["true"], False)
    # both nodes are taken (select/linear gives whole nodes): the second job waits, and says why
    second = provider.submit(make_job(tmp_path / "b", ["sleep", "5"], name="sj-second"))
    waiting = wait_for(lambda: (lambda s: s if s.message else None)(provider.fresh_status(second.id)),
                       "the pending job has a reason")
    assert waiting.state == State.PENDING and waiting.raw_state == "PENDING"
    assert waiting.message.startswith("waiting: ") and waiting.message != "waiting: None"
    cancelled = first.cancel()
    assert cancelled.state in (State.RUNNING, State.CANCELLED)  # COMPLETING until its processes are gone
    final = first.wait(timeout=120)
    assert final.state == State.CANCELLED and final.raw_state == "CANCELLED"
    wait_for(lambda: not sleepers(marker), "the job's processes are gone")
    assert second.wait(timeout=180).state == State.SUCCEEDED
    assert provider.cancel(first.id).state == State.CANCELLED  # idempotent


def sleepers(seconds):
    return _processes(lambda cmd: cmd[:2] == [b"sleep", seconds.encode()])


def test_a_retried_submit_finds_the_first_job(slurm_cluster, tmp_path):
    provider = get_provider("slurm")
    job = make_job(tmp_path, ["sleep", "30"], name="sj-retry")
    first = provider.submit(job)
    again = get_provider("slurm").submit(job)
    try:
        assert again.id == first.id
        assert [row for row in squeue_all() if row[2] == "sj-retry" and row[1] != "CANCELLED"] == \
            [[first.id, row[1], "sj-retry"] for row in squeue_all() if row[0] == first.id]
    finally:
        first.cancel()


class FailsAfterSbatch(SlurmProvider):
    """The cluster's answer to the first read after sbatch is lost (a dropped connection)."""

    reads = 0

    def _describe(self, job_id):
        type(self).reads += 1
        if type(self).reads == 1:
            raise PlatformError("the connection dropped")
        return super()._describe(job_id)


def test_a_submit_that_fails_after_sbatch_cancels_the_job_first(slurm_cluster, tmp_path):
    provider = FailsAfterSbatch()
    with pytest.raises(PlatformError):
        provider.submit(make_job(tmp_path, ["sleep", "300"], name="sj-undone"))
    rows = [row for row in squeue_all() if row[2] == "sj-undone"]
    assert rows and all(state in ("CANCELLED", "COMPLETING") for _, state, _ in rows), rows


def test_secrets_reach_the_job_and_no_file(slurm_cluster, tmp_path, monkeypatch):
    value = "v4lue-'$(touch pwned)' \"x\" `touch pwned`"
    monkeypatch.setenv("CT_SLURM_TEST_SECRET", value)
    job = make_job(tmp_path, ["sh", "-c", 'printf %s "$API_TOKEN" | sha256sum'],
                   nodes=1, secrets={"API_TOKEN": {"from_env": "CT_SLURM_TEST_SECRET"}})
    run = get_provider("slurm").submit(job)
    assert run.wait(timeout=180).state == State.SUCCEEDED
    assert hashlib.sha256(value.encode()).hexdigest() in "".join(run.logs())  # the job saw it byte for byte
    for path in (tmp_path / "wd").rglob("*"):
        if path.is_file() and not path.name.endswith(".tar.gz"):
            assert b"v4lue" not in path.read_bytes(), path
    assert not list(tmp_path.rglob("pwned"))


def test_no_accounting_a_job_slurm_forgot_is_read_from_its_files(slurm_cluster, tmp_path):
    # the real commands know nothing of this id: squeue and scontrol refuse it, sacct has no database
    provider = get_provider("slurm")
    provider.account = {"workdir": str(tmp_path)}
    number = "987654"
    for args in (["squeue", "-h", "-j", number], ["scontrol", "show", "job", number]):
        assert subprocess.run(args, capture_output=True).returncode != 0
    sacct = subprocess.run(["sacct", "-n", "-X", "-P", "-j", number, "-o", ",".join(SACCT_FIELDS)],
                           capture_output=True, text=True)
    assert parse_sacct(sacct.stdout) == []
    with pytest.raises(JobNotFound):
        provider.status(number)
    job_dir = tmp_path / "jobs" / number
    job_dir.mkdir(parents=True)
    ended = provider.fresh_status(number)
    assert ended.state == State.UNKNOWN and "no longer remembers" in ended.message
    (job_dir / "exit-code").write_text("0\n")
    assert provider.fresh_status(number).state == State.SUCCEEDED
    (job_dir / "exit-code").write_text("1\n")
    failed = provider.fresh_status(number)
    assert failed.state == State.FAILED and failed.exit_code == 1


def test_scontrols_line_is_read_as_slurm_prints_it(slurm_cluster, tmp_path):
    provider = get_provider("slurm")
    run = provider.submit(make_job(tmp_path, ["true"], nodes=1))
    run.wait(timeout=180)
    shown = subprocess.run(["scontrol", "show", "job", "-o", run.id], capture_output=True, text=True, check=True)
    fields = parse_scontrol(shown.stdout)
    assert fields["JobId"] == run.id and fields["JobName"] == "sj" and fields["JobState"] == "COMPLETED"
    assert fields["StdOut"] == str(tmp_path / "wd" / "logs" / f"{run.id}.out")
    assert fields["Comment"].startswith("cloudtrain:")
    assert fields["NumNodes"] == "1" and fields["ExitCode"] == "0:0"


def test_the_rendered_script_is_accepted_by_sbatch_test_only(slurm_cluster, tmp_path):
    """sbatch --test-only validates every option against the real controller, runs nothing."""
    job = make_job(tmp_path, ["true"], max_runtime="1h30m", max_restarts=2,
                   resources={"cpus_per_node": 1, "memory_gb": 0.5},
                   slurm={"partition": "preempt", "exclusive": True})
    request = fill(get_provider("slurm").render(job).request,
                   {Placeholder.CODE_DIGEST: "ab" * 32, Placeholder.SPEC_HASH: "cd" * 32})
    path = tmp_path / "job.sbatch"
    path.write_text(str(request.script))
    done = subprocess.run(["sbatch", "--test-only", str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    refused = subprocess.run(["sbatch", "--test-only", "--partition=nosuch", str(path)], capture_output=True,
                             text=True, cwd=tmp_path)
    assert refused.returncode != 0  # the check is real: a partition the cluster lacks is refused


def test_doctor_online_lists_the_partitions(slurm_cluster):
    said = get_provider("slurm").online_check()
    assert "debug*" in said and "preempt" in said


@pytest.mark.e2e
def test_the_digits_example_trains_on_two_nodes_through_sbatch(slurm_cluster, tmp_path):
    """examples/digits-ddp/job.yaml, unchanged: `cloudtrain submit -p slurm` follows it to the end."""
    env = {"SLURM_CONF": str(slurm_cluster.conf), "CLOUDTRAIN_HOME": str(tmp_path / "home"),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
           "CLOUDTRAIN_POLL_SECONDS": "1"}
    workdir = tmp_path / "wd"
    job = EXAMPLES / "digits-ddp" / "job.yaml"
    done = run_cli("submit", "-p", "slurm", job, "--set", f"providers.slurm.workdir={workdir}", env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_accuracy" in done.stdout
    handle = [w for w in done.stdout.split() + done.stderr.split() if w.startswith("slurm://")][0]
    assert run_cli("status", handle, env=env, check=0).stdout.split()[1] == "SUCCEEDED"
    assert "test_accuracy" in run_cli("logs", handle, env=env, check=0).stdout
    run_cli("outputs", handle, "--dest", tmp_path / "out", env=env, check=0)
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["test_accuracy"] >= 0.9, metrics
    assert handle in run_cli("list", "-p", "slurm", env=env, check=0).stdout


ALLREDUCE = """\
import os
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)  # pickled: mpi4py duplicates COMM_WORLD first
print(f"allreduce rank={comm.Get_rank()} size={comm.Get_size()} sum={total} "
      f"node={os.environ.get('SLURMD_NODENAME')}", flush=True)
"""


def test_an_mpi_job_runs_its_ranks_on_both_nodes(slurm_cluster, tmp_path, venv_on_path):
    """Node 0's mpirun over the allocation (Open MPI starts its daemons through srun), two ranks
    a node.  Both test nodes are one host: Open MPI's shared-memory files of the two daemons
    collided (a SIGSEGV in MPI_Comm_dup) until the launcher left shared memory out there."""
    job = make_job(tmp_path, ["python", "allreduce.py"], files={"allreduce.py": ALLREDUCE},
                   distribution={"type": "mpi", "procs_per_node": 2})
    run = get_provider("slurm").submit(job)
    status = run.wait(timeout=180)
    text = "".join(run.logs())
    assert status.state == State.SUCCEEDED, (status, text[-3000:])
    # mpirun tags every write of a rank ("[1,2]<stdout>:"), and two ranks' writes may share a line
    found = sorted(re.findall(r"allreduce rank=(\d+) size=(\d+) sum=(\d+) node=(n\d)", text))
    assert found == [(str(r), "4", "10", "n1" if r < 2 else "n2") for r in range(4)], text


RAY_NODES = """\
import os
import time

import ray


@ray.remote(num_cpus=0)
def node():
    return os.environ["CLOUDTRAIN_NODE_RANK"], os.environ.get("SLURMD_NODENAME")


ray.init()
expected = int(os.environ["CLOUDTRAIN_NUM_NODES"])
deadline = time.monotonic() + 120
while len([n for n in ray.nodes() if n["Alive"]]) < expected and time.monotonic() < deadline:
    time.sleep(0.5)
print("ray nodes alive:", len([n for n in ray.nodes() if n["Alive"]]), flush=True)
for rank, name in ray.get([node.options(resources={f"Rank:{i}": 1}).remote() for i in range(expected)]):
    print(f"ray task on rank={rank} slurm_node={name}", flush=True)
"""


def test_a_ray_job_has_its_head_on_the_first_node_and_both_nodes_join(slurm_cluster, tmp_path, venv_on_path):
    job = make_job(tmp_path, ["python", "ray_nodes.py"], files={"ray_nodes.py": RAY_NODES},
                   distribution={"type": "ray"})
    run = get_provider("slurm").submit(job)
    status = run.wait(timeout=300)
    text = "".join(run.logs())
    assert status.state == State.SUCCEEDED, (status, text[-3000:])
    assert "ray nodes alive: 2" in text
    # a task pinned to each node's Rank:<i> resource ran on that Slurm node (the head is node 0: n1)
    assert "ray task on rank=0 slurm_node=n1" in text and "ray task on rank=1 slurm_node=n2" in text, text[-3000:]


CHECKPOINTING = """\
import os
import time

path = os.path.join(os.environ["CLOUDTRAIN_CHECKPOINT_DIR"], "step")
node = int(os.environ["CLOUDTRAIN_NODE_RANK"])
attempt = int(os.environ["CLOUDTRAIN_RESTART_COUNT"])
start = int(open(path).read()) if os.path.exists(path) else 0
print(f"node {node} attempt {attempt} resumes at step {start}", flush=True)
end = start + 3 if attempt else 10 ** 6  # the first attempt runs until its node fails
for step in range(start + 1, end + 1):
    time.sleep(0.5)
    if node == 0:
        with open(path + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(path + ".tmp", path)
print(f"node {node} attempt {attempt} done at step {end}", flush=True)
"""


@pytest.fixture
def node_n2_restored(slurm_cluster):
    """The test may kill n2's slurmd: it runs again afterwards, for the session's other tests."""
    try:
        yield slurm_cluster
    finally:
        slurm_cluster.restore_slurmd("n2")
    assert sorted(subprocess.run(["sinfo", "-h", "-N", "-p", "debug", "-o", "%N"], capture_output=True, text=True,
                                 check=True).stdout.split()) == ["n1", "n2"]


def test_a_node_that_fails_mid_run_requeues_the_job_which_resumes_from_its_checkpoint(
        node_n2_restored, tmp_path, venv_on_path):
    """n2's slurmd killed mid-run: the controller stops hearing it (SlurmdTimeout), sets the node
    DOWN and ends the job with NODE_FAIL; the job asked for --requeue (max_restarts), so Slurm
    requeues it and, once n2 is back, runs it again under the same id, SLURM_RESTART_COUNT=1,
    with the checkpoint the first run left."""
    cluster = node_n2_restored
    provider = get_provider("slurm")
    run = provider.submit(make_job(tmp_path, ["python", "ckpt.py"], files={"ckpt.py": CHECKPOINTING},
                                   max_restarts=1, name="sj-nodefail"))
    step = tmp_path / "wd" / "jobs" / run.id / "checkpoint" / "step"
    try:
        wait_for(lambda: step.exists() and int(step.read_text() or 0) >= 3, "the first run checkpoints", 180)
        cluster.kill_slurmd("n2")
        wait_for(lambda: "DOWN" in subprocess.run(["scontrol", "show", "node", "n2"], capture_output=True,
                                                  text=True).stdout, "the controller sets n2 DOWN", 120)
        # requeued, not ended: it waits for its nodes again (BeginTime: a requeued job waits out
        # AuthInfo's cred_expire first, slurm.conf(5))
        wait_for(lambda: provider.fresh_status(run.id).state == State.PENDING, "Slurm requeues the job", 60)
        cluster.restore_slurmd("n2")
        status = run.wait(timeout=240)
        text = "".join(run.logs())
        assert status.state == State.SUCCEEDED and status.raw_state == "COMPLETED", (status, text[-3000:])
        assert len(status.restarts) == 1, status
        assert "NODE FAILURE" in text  # slurmstepd's words on n1 when the controller ended the job
        resumed = re.search(r"node 0 attempt 1 resumes at step (\d+)", text)
        assert resumed, text[-3000:]
        first = int(resumed.group(1))
        assert first >= 3, text[-3000:]  # the second run started from the first one's checkpoint, not from 0
        for node in (0, 1):
            assert f"node {node} attempt 1 done at step {first + 3}" in text, text[-3000:]
        assert int(step.read_text()) == first + 3
    finally:
        if not provider.fresh_status(run.id).terminal:  # a failed test leaves no job holding the nodes
            provider.cancel(run.id)
    assert not [pid for pid in processes_running("ckpt.py")], "a run's process outlived the job"


def processes_running(script):
    return _processes(lambda cmd: script.encode() in cmd)


def _processes(matches):
    """PIDs of this machine's processes whose argv (``/proc/PID/cmdline`` split) ``matches``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if matches(cmd):
                found.append(int(entry))
    return found


def test_doctor_online_through_the_cli(slurm_cluster, tmp_path):
    done = run_cli("doctor", "-p", "slurm", "--online", env={"SLURM_CONF": str(slurm_cluster.conf),
                                                             "CLOUDTRAIN_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "debug*" in done.stdout and "preempt" in done.stdout


# -- the login mode: a local sshd on 127.0.0.1 with keys made for the test ----------------------
@pytest.fixture
def login_node(tmp_path, slurm_cluster):
    """sshd on 127.0.0.1 (its own host key, config and pid file), a client key it accepts and a
    known_hosts naming its host key; yields the ssh options a provider needs, and stops sshd by its
    PID at the end."""
    d = tmp_path / "ssh"
    d.mkdir(mode=0o700)
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1:{port}\nHostKey {d / 'host'}\nPidFile {d / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nAcceptEnv SLURM_CONF\n")
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} " + (d / "host.pub").read_text().split(" ", 2)[0] + " "
                                   + (d / "host.pub").read_text().split(" ", 2)[1] + "\n")
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (d / "sshd.pid").exists(), "sshd listens", 30)
        options = ("-p", str(port), "-i", str(d / "client"), "-o", "IdentitiesOnly=yes",
                   "-o", f"UserKnownHostsFile={d / 'known_hosts'}", "-o", "StrictHostKeyChecking=yes",
                   "-o", "SendEnv=SLURM_CONF", "-F", "/dev/null")
        yield f"{os.environ.get('USER') or 'root'}@127.0.0.1", options
    finally:
        sshd.terminate()
        sshd.wait(timeout=30)
    assert sshd.poll() is not None


def ssh_children(control_dir_prefix="cloudtrain-ssh-"):
    """Live ssh master processes of ours (their ControlPath is in a cloudtrain-ssh- directory)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if cmd.startswith(b"ssh") and control_dir_prefix.encode() in cmd:
                found.append(int(entry))
    return found


def test_the_login_mode_runs_every_command_over_ssh(login_node, tmp_path):
    login, options = login_node
    provider = SlurmProvider(ssh_options=options)
    job = make_job(tmp_path, ["sh", "-c", "echo over-ssh node=$SLURM_NODEID"], slurm={"login": login})
    try:
        run = provider.submit(job)
        assert run.id.startswith(login + "/")
        status = run.wait(timeout=180)
        assert status.state == State.SUCCEEDED, status
        text = "".join(run.logs())
        assert "over-ssh node=0" in text and "over-ssh node=1" in text
        assert ssh_children(), "one master connection carries the burst"
    finally:
        provider.close()
    wait_for(lambda: not ssh_children(), "the master connection is closed", 30)


def test_a_login_that_does_not_answer_is_a_platform_error(tmp_path, slurm_cluster):
    provider = SlurmProvider(ssh_options=("-p", "1", "-o", "ConnectTimeout=5", "-F", "/dev/null"))
    job = make_job(tmp_path, ["true"], slurm={"login": "nobody@127.0.0.1"})
    with pytest.raises(PlatformError) as err:
        provider.submit(job)
    assert "nobody@127.0.0.1" in str(err.value)
    provider.close()
