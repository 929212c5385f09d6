"""A real, small file system as ``CLOUDTRAIN_HOME`` (a tmpfs: CI runs as root), and what the
fault tests look at: a job's processes and containers, a file that takes what room is left."""
from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import pytest


def processes_in(directory: Path):
    """PIDs of live processes whose working directory is inside ``directory``."""
    root, found = str(Path(directory).resolve()), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + "/"):
            found.append(int(entry))
    return found


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
    for pid in processes_in(path):  # a job the test left behind
        try:
            os.killpg(os.getpgid(pid), 9)
        except OSError:
            pass
    for _ in range(50):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


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
        cancel_unfinished(path)
        unmount(path)


def cancel_unfinished(home: Path) -> None:
    from cloudtrain.plugins import get_provider
    from cloudtrain.states import TERMINAL
    from cloudtrain.store import Store
    try:
        rows = Store(home / "state.db").list_jobs()
    except Exception:  # noqa: BLE001 -- a store the test broke: the unmount ends its processes
        return
    for row in rows:
        if row["state"] not in TERMINAL:
            try:
                get_provider(row["provider"]).cancel(row["id"])
            except Exception:  # noqa: BLE001
                pass
