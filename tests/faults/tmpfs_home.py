"""A real, small file system as ``CLOUDTRAIN_HOME`` (a tmpfs: CI runs as root), and what the
fault tests look at: a job's processes and containers, a file that takes what room is left."""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from processes import processes_under as processes_in


def wait_for(predicate, timeout: float, what: str, explain=lambda: ""):
    """``predicate()``'s first true value within ``timeout`` seconds, else an AssertionError
    saying ``what`` was not so (and ``explain()``: what was)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not so after {timeout:.0f} s; {explain()}")
        time.sleep(0.2)


def fill(directory: Path) -> Path:
    """A file in ``directory`` that takes every byte left on its file system."""
    path = directory / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        block = b"\0" * 65536
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(block) == 1:
                    break
                block = block[: len(block) // 2]
    finally:
        os.close(fd)
    return path


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"cannot mount a {size} tmpfs at {path} for CLOUDTRAIN_HOME (the fault tests need root, "
                    f"as CI runs them): {proc.stderr.strip() or proc.returncode}")


def unmount(path: Path) -> None:
    for _ in range(50):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def jobs_ended(home):
    """The ``home`` fixture, and every job under it ended afterwards whatever its store says."""
    yield home
    end_jobs(home)


@pytest.fixture
def small_home(tmp_path, monkeypatch):
    """CLOUDTRAIN_HOME on a 12 MiB tmpfs, unmounted (and whatever ran there ended) afterwards."""
    path = tmp_path / "small-home"
    mount_tmpfs(path, "12m")
    monkeypatch.setenv("CLOUDTRAIN_HOME", str(path))
    try:
        yield path
    finally:
        filler = path / "filler"
        if filler.exists():
            filler.unlink()
        end_jobs(path)
        unmount(path)


def end_jobs(home: Path) -> None:
    """End every job under ``home`` without its store (which a test may have broken, or a
    cloudtrain without the fix may not read): SIGTERM to each supervisor (it stops its nodes and
    removes its containers), then SIGKILL to what is left, and the containers removed."""
    runs = home / "runs"
    if not runs.is_dir():
        return
    dirs = [str(d) for d in runs.iterdir()]
    supervisors = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(a.endswith(".supervisor") for a in argv) and any(d in argv for d in dirs):
            supervisors.append(int(entry))
    for pid in supervisors:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in supervisors):
        time.sleep(0.2)
    for directory in dirs:
        for pid in processes_in(Path(directory)):
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
    ids = [os.path.basename(d) for d in dirs]
    subprocess.run(["sh", "-c", 'for id; do docker ps -aq --filter "label=cloudtrain.job=$id" | '
                    'xargs -r docker rm -f; docker network rm "ct-$id"; done', "sh", *ids],
                   capture_output=True)
