"""Issue 26, items 6 and 7: secrets stay masked everywhere (the run's files included), and the
home, its store and its runs are the user's alone; hostile input is refused at its line.

The runs are real: a local ddp job prints a private key it got from ``secrets:`` in every way
a program may (whole, one line per write, inside JSON, in an exception torchrun records), and
every file under the run directory and ``$CLOUDTRAIN_HOME`` is read for any line of it."""
import base64
import json
import os
import signal
import sqlite3
import stat
import sys
from pathlib import Path

import pytest

from conftest import run_cli, write_job

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from helpers import assert_nothing_left, handle_from, run_dir, wait_for  # noqa: E402

JOB_SCRIPT = '''
import json, os, sys, time
from torch.distributed.elastic.multiprocessing.errors import record

key = os.environ["PEM_KEY"]


@record
def main():
    rank = os.environ.get("RANK", "0")
    print(key, flush=True)                      # whole, one write
    for line in key.splitlines():               # a line per write
        sys.stdout.write("  " + line + "\\n")
        sys.stdout.flush()
    print(json.dumps({"rank": rank, "key": key}), flush=True)  # its lines joined by \\n
    print(key, file=sys.stderr, flush=True)
    print("rank %s printed the key" % rank, flush=True)
    if os.environ.get("SLEEP"):
        time.sleep(600)
    if rank == "1":
        raise RuntimeError("cannot use this key: " + key)   # torchrun's error.json holds it


main()
'''


def pem_key() -> str:
    """A private key's shape: header, 64-character base64 lines, a short last line, footer."""
    body = base64.b64encode(os.urandom(300)).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "\n".join(["-----BEGIN PRIVATE KEY-----", *lines, "-----END PRIVATE KEY-----"])


def secret_job(tmp_path, key, env=""):
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(JOB_SCRIPT)
    (tmp_path / "key.pem").write_text(key + "\n")
    return write_job(tmp_path, f"""
        name: pem
        code: code
        command: python job.py
        distribution: {{type: ddp, nodes: 1, procs_per_node: 2}}
        env: {{OMP_NUM_THREADS: "1"{env}}}
        secrets: {{PEM_KEY: {{from_file: key.pem}}}}
    """)


def leaks(key, roots, texts=()):
    """``(where, line)`` for every line of ``key`` found in a file under ``roots`` or in ``texts``."""
    lines = [line for line in key.splitlines()]
    found = []
    for root in roots:
        for path in Path(root).rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                found += [(str(path), line) for line in lines if line.encode() in data]
    for i, text in enumerate(texts):
        found += [(f"output {i}", line) for line in lines if line in text]
    return found


@pytest.mark.e2e
def test_a_multi_line_secret_the_job_prints_is_in_no_file_of_the_run(tmp_path, home):
    key = pem_key()
    proc = run_cli("submit", secret_job(tmp_path, key), timeout=240)
    assert proc.returncode == 1, proc.stderr  # rank 1 fails, on purpose
    handle = handle_from(proc.stderr)
    assert "rank 0 printed the key" in proc.stdout and "rank 1 printed the key" in proc.stdout
    logs = run_cli("logs", handle).stdout
    assert leaks(key, [home, tmp_path / "code"], [proc.stdout, proc.stderr, logs]) == []
    assert "***" in (run_dir(home, handle) / "job.log").read_text()


@pytest.mark.e2e
def test_torchrun_files_of_a_killed_supervisor_are_gone_once_cloudtrain_looks(tmp_path, home):
    key = pem_key()
    proc = run_cli("submit", secret_job(tmp_path, key, env=', SLEEP: "1"'), "--detach", check=0)
    handle = proc.stdout.strip()
    directory = run_dir(home, handle)
    wait_for(lambda: (directory / "job.log").exists() and
             (directory / "job.log").read_text().count("printed the key") == 2, timeout=180)
    # torchrun's --tee files hold what the ranks printed, in clear, while the job runs
    assert list(directory.glob("node-0/torchrun/**/stdout.log"))
    with sqlite3.connect(home / "state.db") as db:
        (pid,) = db.execute("SELECT supervisor_pid FROM jobs").fetchone()
    os.kill(pid, signal.SIGKILL)
    assert_nothing_left(directory)  # the nodes die with their supervisor
    status = run_cli("status", handle, "-o", "json", check=0)
    assert json.loads(status.stdout)["state"] == "FAILED"
    assert leaks(key, [home]) == []


# -- files: the home, the store and the runs are the user's alone -------------------------------
def private_modes(root: Path):
    """``{path relative to root: mode}`` of what keeps others out: the home, ``runs/``, each run's
    directory (what a run holds is behind it) and the store's files."""
    paths = [root, *root.glob("runs"), *root.glob("runs/*"), *root.glob("state.db*")]
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in paths}


@pytest.fixture
def open_umask():
    """The common umask (022): what makes a directory 0755 unless cloudtrain says otherwise."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("commands", [["submit"], ["list"], ["config-set", "list"], ["validate", "submit"],
                                      ["an-older-home", "list"]])
def test_the_home_is_0700_and_the_store_0600_whichever_command_makes_them(tmp_path, open_umask, commands):
    home = tmp_path / "fresh-home"
    env = {"CLOUDTRAIN_HOME": str(home), "CLOUDTRAIN_CONFIG": str(home / "config.yaml")}
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text("print('hello')\n")
    job = write_job(tmp_path, """
        name: modes
        code: code
        command: python job.py
        distribution: {type: none}
    """)
    for command in commands:
        if command == "submit":
            run_cli("submit", job, env=env, check=0, timeout=120)
            assert list((home / "runs").iterdir())
        elif command == "validate":
            run_cli("validate", job, env=env, check=0)
            if home.exists():  # validate need not make the home; if it does, it is private
                assert stat.S_IMODE(home.stat().st_mode) == 0o700
        elif command == "list":
            run_cli("list", env=env, check=0)
        elif command == "config-set":
            run_cli("config", "set", "-p", "docker", "image=python:3.12", env=env, check=0)
        else:  # what an older cloudtrain left: a home and a store anyone may read
            (home / "runs").mkdir(parents=True)
            sqlite3.connect(home / "state.db").close()
            for path in (home, home / "runs"):
                path.chmod(0o755)
            (home / "state.db").chmod(0o644)
    modes = private_modes(home)
    wrong = {p: oct(m) for p, m in modes.items() if m != (0o600 if p.startswith("state.db") else 0o700)}
    assert wrong == {}, modes
    assert "state.db" in modes and "runs" in modes
