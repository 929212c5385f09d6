import json
import time
from pathlib import Path

from processes import processes_under


def wait_for(predicate, timeout=60.0, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def handle_from(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.startswith("submitted "):
            return line.split()[1]
    raise AssertionError(f"no handle in: {stderr}")


def run_dir(home: Path, handle: str) -> Path:
    return home / "runs" / handle.split("://", 1)[1]


def metrics(home: Path, handle: str) -> dict:
    return json.loads((run_dir(home, handle) / "output" / "metrics.json").read_text())


def assert_nothing_left(directory: Path, grace: float = 15.0):
    """No process of the job survives it (Ray's idle workers may take a moment to notice)."""
    deadline = time.monotonic() + grace
    while processes_under(directory):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes left behind: {processes_under(directory)}")
        time.sleep(0.2)
