"""The live processes a test left behind, found through /proc (shared by tests/e2e and tests/faults)."""
import os
from pathlib import Path


def processes_under(directory: Path):
    """PIDs of live processes whose working directory is inside ``directory``."""
    found = []
    root = str(Path(directory).resolve())
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
