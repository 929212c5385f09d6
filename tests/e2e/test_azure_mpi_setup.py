"""The job's ``setup:`` on Azure ML's mpi distribution, really run: Azure ML runs mpirun itself
and every rank runs the rendered node command (``cloudtrain.launch.mpirank --setup=...``), so the
setup must run once per node, on the node's local rank 0, before any rank's program starts.

Real Open MPI ``mpirun -np 4`` on this machine emulates 2 nodes x 2 ranks: ``-H node0:2,node1:2``
with a remote-shell agent that starts each "node"'s Open MPI daemon here with the node's own
temporary directory (TMPDIR), so Open MPI gives each emulated node its own local ranks 0 and 1
(``OMPI_COMM_WORLD_LOCAL_RANK``) and each node has its own tmp, as two VMs would.  The ranks get
Azure ML's job variables as the azure emulation makes them (``cloudtrain_azure.detect.
node_environment``: AZUREML_RUN_ID, AZ_BATCH_MASTER_NODE, AZ_BATCH_HOST_LIST; the OMPI_* ones
come from the real mpirun) and the render's ``environment_variables``; the command is the render's
``command`` run by ``sh -c``, as Azure ML's mpirun runs it.  Ray on Azure ML runs ``cloudtrain
launch`` per node, which runs the setup before ``ray start``: its rendered command is run too."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import cloudtrain
from cloudtrain.input.loading import job_from_dict
from cloudtrain.extend.plugins import get_provider
from cloudtrain_azure.detect import node_environment

pytestmark = pytest.mark.e2e
CORE = Path(cloudtrain.__file__).resolve().parents[1]  # the cloudtrain under test: what the ranks import
NODES = ("node0", "node1")
# Sleeps first, so a rank that did not wait for it would find nothing; the quote and the $ reach sh
# as written.  It counts its runs in $COUNT_FILE, one line per node's tmp.
SETUP = ('sleep 1; echo "setup here: it\'s $(basename "$TMPDIR")"; echo made > "$TMPDIR/made-by-setup"; '
         'echo "$TMPDIR" >> "$COUNT_FILE"')
FAILING = 'echo "$TMPDIR" >> "$COUNT_FILE"; echo "no matching distribution for nosuchpkg" >&2; exit 3'
PROGRAM = """\
import os, sys
made = os.path.exists(os.path.join(os.environ["TMPDIR"], "made-by-setup"))
print("program rank %s local %s on %s sees setup's file: %s" % (os.environ["RANK"], os.environ["LOCAL_RANK"],
      os.path.basename(os.environ["TMPDIR"]), made), flush=True)
sys.exit(0 if made else 1)
"""
# Runs the node command as Azure ML does (sh -c) and says how each rank ended: mpirun told to let every
# rank run to its end exits 0 whatever they did.
EXIT_REPORT = 'sh -c "$1"; echo "rank exit $?"'
# Starts "HOST COMMAND..." here, as ssh would on HOST, with HOST's own tmp (Open MPI's rsh launcher
# calls the agent with options first, then the host, then the daemon's command line).
AGENT = """#!/bin/sh
while [ "$#" -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
host="$1"; shift
mkdir -p "$NODES_TMP/$host"
TMPDIR="$NODES_TMP/$host" exec /bin/sh -c "$*"
"""


def azure_command(code: Path, setup: str):
    """The rendered Azure ML job's command and environment_variables for a 2 x 2 mpi job."""
    job = job_from_dict({"name": "az-mpi-setup", "code": str(code), "image": "example/train:1",
                         "command": ["python3", "program.py"], "setup": setup,
                         "distribution": {"type": "mpi", "nodes": 2, "procs_per_node": 2},
                         "providers": {"azure": {"compute": "cpu-cluster", "subscription_id": "s",
                                                 "resource_group": "r", "workspace": "w"}}})
    content = get_provider("azure").render(job).artifacts[0].content
    assert content["distribution"] == {"type": "mpi", "process_count_per_instance": 2}
    return content["command"], content["environment_variables"]


def run_emulated(tmp_path: Path, setup: str):
    """mpirun -np 4 over two emulated nodes; returns (CompletedProcess, count file)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "program.py").write_text(PROGRAM)
    command, job_env = azure_command(code, setup)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')  # the image's python3
    (bin_dir / "agent").write_text(AGENT)
    for name in ("python3", "agent"):
        (bin_dir / name).chmod(0o755)
    nodes_tmp = Path(tempfile.mkdtemp(prefix="azn", dir="/tmp"))  # short: Open MPI's sockets live under it
    count = tmp_path / "setup-runs"
    azure = {k: v for k, v in node_environment("mpi", 2, 0, ["127.0.0.1"] * 2, 6105, run_id="az-run-1").items()
             if not k.startswith("OMPI_")}
    env = {**os.environ, **job_env, **azure, "COUNT_FILE": str(count), "NODES_TMP": str(nodes_tmp),
           "PATH": f"{bin_dir}:{os.environ['PATH']}", "OMPI_MCA_plm_rsh_agent": str(bin_dir / "agent"),
           # every rank runs to its end, so each one's own report is seen (Azure ML's mpirun ends the
           # job at the first failing rank: local rank 0's log then holds the reason)
           "OMPI_MCA_orte_abort_on_non_zero_status": "0"}
    env["PYTHONPATH"] = str(CORE)  # after the shipped .cloudtrain the command puts first
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    try:
        proc = subprocess.run(["mpirun", *root, "--oversubscribe", "--tag-output", "-H", "node0:2,node1:2",
                               "-np", "4", "--map-by", "slot", "sh", "-c", EXIT_REPORT, "sh", command],
                              cwd=code, env=env, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(nodes_tmp, ignore_errors=True)
    return proc, count, nodes_tmp


def tagged(output: str, stream: str, pattern: str):
    """{rank: [lines]} of each rank's ``stream`` lines that match ``pattern``.  ``mpirun
    --tag-output`` tags each piece it reads from a rank, and a piece may end mid-line (another
    rank's piece then follows on the same line), so each rank's own text is rebuilt from its pieces
    first."""
    parts = re.split(r"\[\d+,(\d+)\]<(stdout|stderr)>:", output)
    texts = {}
    for rank, which, text in zip(parts[1::3], parts[2::3], parts[3::3]):
        if which == stream:
            texts[int(rank)] = texts.get(int(rank), "") + text
    found = {}
    for rank, text in sorted(texts.items()):
        lines = [line for line in text.splitlines() if re.search(pattern, line)]
        if lines:
            found[rank] = lines
    return found


def test_setup_runs_once_per_node_before_every_rank_of_it(tmp_path):
    proc, count, nodes_tmp = run_emulated(tmp_path, SETUP)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert tagged(proc.stdout, "stdout", r"^rank exit") == {r: ["rank exit 0"] for r in range(4)}, out[-4000:]
    ran = tagged(proc.stdout, "stdout", r"^program rank")
    assert {r: lines[0] for r, lines in ran.items()} == {
        0: "program rank 0 local 0 on node0 sees setup's file: True",
        1: "program rank 1 local 1 on node0 sees setup's file: True",
        2: "program rank 2 local 0 on node1 sees setup's file: True",
        3: "program rank 3 local 1 on node1 sees setup's file: True"}
    # exactly once per emulated node
    assert sorted(count.read_text().splitlines()) == [str(nodes_tmp / n) for n in NODES]
    # its output is in the output of the node's local rank 0 (the node's log), nowhere else
    assert sorted(tagged(proc.stdout, "stdout", r"running setup: sleep 1")) == [0, 2], proc.stdout
    assert {r: lines for r, lines in tagged(proc.stdout, "stdout", r"^setup here").items()} == {
        0: ["setup here: it's node0"], 2: ["setup here: it's node1"]}


def test_a_failing_setup_fails_every_rank_with_its_reason(tmp_path):
    proc, count, nodes_tmp = run_emulated(tmp_path, FAILING)
    out = proc.stdout + proc.stderr
    assert tagged(proc.stdout, "stdout", r"^rank exit") == {r: ["rank exit 1"] for r in range(4)}, out[-4000:]
    reasons = tagged(proc.stderr, "stderr",
                     r"^cloudtrain launch: setup exited with code 3: no matching distribution for nosuchpkg$")
    assert sorted(reasons) == [0, 1, 2, 3], out[-4000:]
    assert all(len(lines) == 1 for lines in reasons.values())  # one line each
    assert "program rank" not in out  # no rank's program started
    assert sorted(count.read_text().splitlines()) == [str(nodes_tmp / n) for n in NODES]


def test_a_restarted_launch_reruns_setup_and_a_shared_marker_directory_is_refused(tmp_path):
    """The marker is named by the run and by this mpirun (PMIX_NAMESPACE): the next start of the
    same run runs setup again, and its other ranks read that start's outcome.  A marker directory
    others may write to is never trusted: the rank fails with the reason and runs nothing."""
    node_tmp = tmp_path / "node"
    node_tmp.mkdir()
    count = tmp_path / "count"
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": str(CORE), "TMPDIR": str(node_tmp),
            "AZUREML_RUN_ID": "az-run-1"}

    def rank(local_rank: int, namespace: str):
        env = {**base, "OMPI_COMM_WORLD_LOCAL_RANK": str(local_rank), "PMIX_NAMESPACE": namespace}
        return subprocess.run([sys.executable, "-m", "cloudtrain.launch.mpirank",
                               f"--setup=echo {namespace} >> {count}", "--", "echo", "program ran"],
                              env=env, capture_output=True, text=True, timeout=120)

    for namespace in ("1", "2"):  # mpirun started twice: setup twice, each start's other rank follows
        assert rank(0, namespace).stdout.endswith("program ran\n")
        assert rank(1, namespace).stdout == "program ran\n"
    assert count.read_text().splitlines() == ["1", "2"]
    [marker_dir] = node_tmp.iterdir()
    marker_dir.chmod(0o777)
    refused = rank(0, "3")
    assert refused.returncode == 1 and "program ran" not in refused.stdout
    assert "not a private directory" in refused.stderr
    assert count.read_text().splitlines() == ["1", "2"]


def test_an_azure_ray_node_runs_setup_before_ray_and_fails_with_its_reason(tmp_path):
    """ray on Azure ML is one ``cloudtrain launch`` per node under Azure's PyTorch distribution:
    the rendered command, run under Azure's node-0 variables, runs the setup before ``ray start``
    and a failing one ends the node with its reason, Ray never started."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "program.py").write_text(PROGRAM)
    job = job_from_dict({"name": "az-ray-setup", "code": str(code), "image": "example/train:1",
                         "command": ["python3", "program.py"], "setup": FAILING,
                         "distribution": {"type": "ray", "nodes": 2},
                         "providers": {"azure": {"compute": "cpu-cluster", "subscription_id": "s",
                                                 "resource_group": "r", "workspace": "w"}}})
    content = get_provider("azure").render(job).artifacts[0].content
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (bin_dir / "ray").write_text(f'#!/bin/sh\necho ray "$@" >> {tmp_path / "ray-calls"}\n')  # never called
    for name in ("python3", "ray"):
        (bin_dir / name).chmod(0o755)
    count = tmp_path / "setup-runs"
    env = {**content["environment_variables"], "CLOUDTRAIN_OUTPUT_DIR": str(tmp_path / "out"),
           **node_environment("ray", 2, 0, ["127.0.0.1", "127.0.0.1"], 29511, run_id="az-run-2"),
           "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(CORE) + os.pathsep + str(CORE.parent / "plugins"),
           "COUNT_FILE": str(count), "TMPDIR": str(tmp_path), "HOME": str(tmp_path)}
    proc = subprocess.run(["sh", "-c", content["command"]], cwd=code, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "cloudtrain launch: setup exited with code 3: no matching distribution for nosuchpkg" in proc.stderr
    assert count.read_text().splitlines() == [str(tmp_path)]
    assert not (tmp_path / "ray-calls").exists() and "program rank" not in proc.stdout
