"""What every fault test needs: a job that only waits, the processes a job left, a bounded poll."""
import os
import subprocess
import sys
import time
from pathlib import Path



def sleeper_job(directory: Path, nodes: int = 1, distribution: str = "none", extra: str = "") -> Path:
    """A job that prints ``up`` and then waits 10 minutes: only a fault or a cancel ends it."""
    from conftest import write_job
    return write_job(directory, f"""
        name: sleeper
        code: {directory}
        command: python -c "import time; print('up', flush=True); time.sleep(600)"
        distribution: {{type: {distribution}, nodes: {nodes}}}
        env: {{OMP_NUM_THREADS: "1"}}
        {extra}
    """)


def job_processes(home: Path):
    """PIDs of the live processes started for jobs under ``home`` (the supervisor, its watchdog,
    the nodes and all they started: each inherits ``CLOUDTRAIN_HOME``)."""
    marker = f"CLOUDTRAIN_HOME={home}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def poll(predicate, bound: float, interval: float = 0.1):
    """``predicate()``'s first true value within ``bound`` seconds; AssertionError after."""
    deadline = time.monotonic() + bound
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {bound:.0f}s: {getattr(predicate, '__doc__', None) or predicate}")
        time.sleep(interval)


def children(pid: int):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


VICTIM = """
import signal, sys, time
def note(signum, frame):
    with open(sys.argv[1], "a") as f:
        f.write("signal %d\\n" % signum)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
    signal.signal(sig, note)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def spawn_victim(signals_file: Path) -> subprocess.Popen:
    """An unrelated process that notes every catchable signal it gets in ``signals_file``."""
    proc = subprocess.Popen([sys.executable, "-c", VICTIM, str(signals_file)], start_new_session=True,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc
