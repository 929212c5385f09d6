"""The local provider's lifecycle: failures, cancel, Ctrl-C, emulation, secrets, restarts, API."""
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli_env, run_cli, write_job
from helpers import assert_nothing_left, handle_from, run_dir, wait_for

pytestmark = pytest.mark.e2e
PROBE = Path(__file__).parent / "probe"


def probe_job(tmp_path, args="", nodes=2, procs=2, extra=""):
    return write_job(tmp_path, f"""
        name: probe
        code: {PROBE}
        command: python probe.py {args}
        distribution: {{type: ddp, nodes: {nodes}, procs_per_node: {procs}}}
        env: {{OMP_NUM_THREADS: "1"}}
        {extra}
    """)


def probes(stdout):
    return [json.loads(line.split("PROBE ", 1)[1]) for line in stdout.splitlines() if "PROBE " in line]


def test_a_failing_rank_fails_the_job_fast_and_leaves_nothing(tmp_path, home):
    proc = run_cli("submit", probe_job(tmp_path, "--fail-rank 3 --exit-code 3 --sleep 120"), timeout=120)
    assert proc.returncode == 1, proc.stderr
    handle = handle_from(proc.stderr)
    assert "rank 3 exits with 3" in proc.stdout
    assert re.search(r"FAILED .*node 1 rank 3 exited with code 3", proc.stderr)
    assert_nothing_left(run_dir(home, handle))
    assert "rank 3 exits with 3" in (run_dir(home, handle) / "node-1" / "rank-3.log").read_text()
    status = json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)
    assert status["state"] == "FAILED" and status["exit_code"] == 1
    assert run_cli("wait", handle).returncode == 1
    # logs: the first failing rank and its last lines first (stderr), then the log as asked (stdout)
    logs = run_cli("logs", handle, "--tail", "1", check=0)
    said = logs.stderr.splitlines()
    assert said[0].startswith(f"cloudtrain: {handle} failed: node 1 rank 3 exited with code 3"), logs.stderr
    assert said[1] == "cloudtrain: its last lines (node 1 rank 3):" and "  [node1/rank3] rank 3 exits with 3" in said
    assert len(logs.stdout.splitlines()) == 1


def test_cancel_from_another_process(tmp_path, home):
    proc = run_cli("submit", probe_job(tmp_path, "--sleep 300"), "--detach", check=0)
    handle = proc.stdout.strip()
    assert re.match(r"^local://probe-[0-9a-f]{6}$", handle)
    wait_for(lambda: "rank 3 working" in run_cli("logs", handle).stdout, timeout=120)
    assert "RUNNING" in run_cli("status", handle, check=0).stdout
    _into_the_running_job(handle, run_dir(home, handle))
    cancelled = run_cli("cancel", handle, check=0)
    assert "CANCELLED" in cancelled.stdout
    assert_nothing_left(run_dir(home, handle))
    assert run_cli("cancel", handle, check=0).stdout == cancelled.stdout  # idempotent
    assert run_cli("wait", handle).returncode == 130
    listed = json.loads(run_cli("list", "-p", "local", "-o", "json", check=0).stdout)
    assert [j["state"] for j in listed if j["handle"] == handle] == ["CANCELLED"]


def _into_the_running_job(handle, directory):
    """logs --node/--rank/--since/--tail, exec and stacks on the running probe (issue 43)."""
    picked = run_cli("logs", handle, "--node", "1", "--rank", "3", "--tail", "2", check=0).stdout.splitlines()
    assert picked == ["[node1/rank3] rank 3 working"] * 2
    node0 = run_cli("logs", handle, "--node", "0", "--since", "1h", check=0).stdout
    assert "[node0/rank1] rank 1 working" in node0 and "[node1/" not in node0
    assert run_cli("logs", handle, "--since", "2099-01-01", check=0).stdout == ""
    # exec: node 1's working directory and environment, the command's exit code
    shown = run_cli("exec", handle, "--node", "1", "--", "python", "-c",
                    "import os, sys; print(os.getcwd()); print(os.environ['CLOUDTRAIN_NODE_RANK']); sys.exit(7)")
    assert shown.returncode == 7 and shown.stdout.splitlines() == [str(directory / "node-1" / "code"), "1"]
    assert run_cli("exec", handle, "--node", "5", "--", "true").returncode == 2
    # stacks: every rank, in the function the probe sleeps in; py-spy, then faulthandler alone
    for env in ({}, {"CLOUDTRAIN_PY_SPY": ""}):
        stacks = run_cli("stacks", handle, env=env, check=0).stdout
        for rank in range(4):
            block = stacks.split(f" rank {rank} (")[1].split("== node")[0]
            assert "keep_working" in block and "probe.py" in block, (env, stacks)
    wait_for(lambda: run_cli("logs", handle, "--rank", "3", "--tail", "1").stdout  # the ranks went on
             == "[node1/rank3] rank 3 working\n")


def _ctrl_c_reaches_it():
    """A terminal's Ctrl-C: a command started in the background by a non-interactive shell (a CI
    step run with ``&``, ``nohup``) inherits SIGINT *ignored*, and Python keeps it ignored; the
    test's submit must get SIGINT as a terminal would give it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # (a CI step under nohup inherits SIGHUP ignored)


# SIGHUP: the terminal the job is followed from closed (issue 44, item 8): cancelled as by Ctrl-C
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["ctrl-c", "sighup"])
def test_ctrl_c_cancels_cleanly(tmp_path, home, sig):
    proc = subprocess.Popen([sys.executable, "-m", "cloudtrain", "submit", str(probe_job(tmp_path, "--sleep 300"))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
                            preexec_fn=_ctrl_c_reaches_it)
    try:
        wait_for(lambda: list((home / "runs").glob("*/job.log")) and
                 "working" in next((home / "runs").glob("*/job.log")).read_text(), timeout=120)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    handle = handle_from(err)
    assert "cancelling" in err
    assert json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)["state"] == "CANCELLED"
    assert_nothing_left(run_dir(home, handle))


def test_emulating_a_platform_with_other_meanings(tmp_path, home):
    """fakeone injects TI-ONE's WORLD_SIZE=nodes, RANK=node; the script still sees PyTorch's."""
    proc = run_cli("submit", probe_job(tmp_path), "--emulate", "fakeone", timeout=180)
    assert proc.returncode == 0, proc.stderr
    seen = probes(proc.stdout)
    assert len(seen) == 4
    assert {s["CLOUDTRAIN_PLATFORM"] for s in seen} == {"fakeone"}
    assert sorted(int(s["RANK"]) for s in seen) == [0, 1, 2, 3]
    assert {s["WORLD_SIZE"] for s in seen} == {"4"} and {s["allreduce"] for s in seen} == {6.0}
    assert sorted(s["CLOUDTRAIN_NODE_RANK"] for s in seen) == ["0", "0", "1", "1"]


def test_secrets_reach_the_nodes_but_no_output(tmp_path, home):
    secret = "tok-e2e-5f1d9c"
    job = probe_job(tmp_path, "--print-secret API_TOKEN", nodes=1, procs=2,
                    extra="secrets: {API_TOKEN: {from_env: CT_E2E_TOKEN}}")
    proc = run_cli("submit", job, env={"CT_E2E_TOKEN": secret}, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert all(s["secret_present"] for s in probes(proc.stdout))
    handle = handle_from(proc.stderr)
    texts = [proc.stdout, proc.stderr, run_cli("logs", handle).stdout,
             run_cli("render", "-p", "local", job, env={"CT_E2E_TOKEN": secret}).stdout]
    texts += [p.read_text(errors="replace") for p in run_dir(home, handle).rglob("*")
              if p.is_file() and p.suffix in (".log", ".json")]
    for text in texts:
        assert secret not in text
    assert "secret value: ***" in proc.stdout


def test_max_restarts_recovers_from_a_failure(tmp_path, home):
    job = probe_job(tmp_path, "--fail-once", extra="max_restarts: 1")
    proc = run_cli("submit", job, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "failing on purpose, first attempt" in proc.stdout
    assert {s["CLOUDTRAIN_RESTART_COUNT"] for s in probes(proc.stdout)} == {"0", "1"}
    assert "restarting every node (restart 1 of 1)" in proc.stdout


def test_python_api_submit_wait_logs(tmp_path, home):
    import cloudtrain
    job = cloudtrain.load_job(probe_job(tmp_path), overrides={"distribution.nodes": 1})
    assert cloudtrain.render(job, provider="local").envelope()["artifacts"][0]["kind"] == "local/process"
    run = cloudtrain.submit(job, provider="local")
    final = run.wait(timeout=180)
    assert final.state.value == "SUCCEEDED" and final.exit_code == 0
    assert run.status().state is cloudtrain.State.SUCCEEDED
    assert len(probes("".join(run.logs()))) == 2
    assert cloudtrain.attach(run.handle).status().state.value == "SUCCEEDED"
    assert run.cancel().state.value == "SUCCEEDED"  # cancel after the end changes nothing
    assert any(j.handle == run.handle for j in cloudtrain.list_jobs("local"))
