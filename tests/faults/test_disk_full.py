"""A full disk under CLOUDTRAIN_HOME (a real 12 MiB tmpfs): a job whose logs fill it ends FAILED
with "disk full under <home>" and none of its processes or containers left; afterwards, with
the disk still full, commands that read work, `submit` says so in one line (exit 3) and leaves
no run directory and no record."""
from __future__ import annotations

import json
import textwrap

import pytest

from conftest import run_cli, write_job
from tmpfs_home import fill, processes_in, small_home, wait_for  # noqa: F401 -- small_home: a fixture

# every line goes to job.log, node-<i>.log and node-<i>/rank-<i>.log: 12 MiB fill in a second
SPEW = "import itertools\nfor i in itertools.count():\n    print(i, 'x' * 2000, flush=True)\n"


def spew_job(tmp_path, provider):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "spew.py").write_text(SPEW)
    image = "image: cloudtrain/test-python:latest\n" if provider == "docker" else ""
    return write_job(tmp_path, textwrap.dedent("""\
        name: spew
        code: ./code
        command: python spew.py
        distribution: {type: none, nodes: 2}
        """) + image)


def containers_of(job_id):
    import docker
    client = docker.from_env()
    return client.containers.list(all=True, filters={"label": f"cloudtrain.job={job_id}"})


def status_of(handle):
    proc = run_cli("status", handle, "-o", "json", timeout=60)
    return json.loads(proc.stdout) if proc.returncode == 0 else {"state": f"exit {proc.returncode}: {proc.stderr}"}


@pytest.mark.serial  # root: mounts a tmpfs and fills it
@pytest.mark.parametrize("provider", ["local", "docker"])
def test_a_job_that_fills_the_disk_fails_saying_so_and_commands_say_it_in_one_line(tmp_path, small_home, provider):
    job = spew_job(tmp_path, provider)
    handle = run_cli("submit", "-p", provider, job, "--detach", cwd=tmp_path, check=0).stdout.strip()
    job_id = handle.split("://", 1)[1]
    run_dir = small_home / "runs" / job_id

    final = wait_for(lambda: (s := status_of(handle))["state"] in ("FAILED", "SUCCEEDED", "CANCELLED") and s,
                     timeout=90, what=f"{handle} ends on a full disk",
                     explain=lambda: f"its status: {status_of(handle)}; supervisor.log: "
                                     f"{(run_dir / 'supervisor.log').read_text()[-3000:]}")
    assert final["state"] == "FAILED", final
    assert f"disk full under {small_home}" in final["message"], final
    wait_for(lambda: not processes_in(run_dir), timeout=15, what="no process of the job is left")
    if provider == "docker":
        assert containers_of(job_id) == []

    fill(small_home)  # whatever room the job's end gave back: none is left now
    runs_before = sorted(p.name for p in (small_home / "runs").iterdir())

    status = run_cli("status", handle, "-o", "json", timeout=60)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "FAILED"
    listed = run_cli("list", "-p", provider, "-o", "json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [j["handle"] for j in json.loads(listed.stdout)] == [handle]
    assert run_cli("cancel", handle, timeout=60).returncode == 0  # it has ended: nothing to write

    again = run_cli("submit", "-p", provider, job, "--detach", cwd=tmp_path, timeout=60)
    assert again.returncode == 3, again.stderr
    assert again.stdout == ""
    lines = again.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cloudtrain: error: "), again.stderr
    assert f"disk full under {small_home}" in lines[0]
    assert sorted(p.name for p in (small_home / "runs").iterdir()) == runs_before  # no half-made run
    listed = run_cli("list", "-p", provider, "-o", "json", timeout=60)
    assert [j["handle"] for j in json.loads(listed.stdout)] == [handle]  # and no record of it
