"""Unpacking a code archive on a node: peak RSS and time, whatever the member sizes.

    python bench/bench_unpack.py [--mb 1024] [--rounds 3] [--python PYTHON]

The archive holds one member of ``--mb`` MiB (zeros: a few MiB packed, the worst case for a
reader that reads a member whole), ten of ``--mb / 10`` MiB (random: incompressible) and the
launcher's ``unpack.py`` where the bundle puts it.  Each round runs what a SageMaker, EC2, TI-ONE
or ModelArts node runs, ``python3 -c unpack.BOOTSTRAP --sha256 HEX ARCHIVE DEST`` (the digest
checked, then cloudtrain's unpacker), in a new process, and reads that process's peak RSS from
``wait4``.  Side by side: ``tar xzf`` of the same archive.  The goal: peak RSS <= 100 MB.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "core"))

from cloudtrain.launch import unpack as unpack_module  # noqa: E402
from cloudtrain.launch.unpack import SOURCE_IN_ARCHIVE, bootstrap_argv  # noqa: E402

MiB = 1 << 20
GOAL_MB = 100


class Zeros(io.RawIOBase):
    def __init__(self, size: int):
        self.left = size

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def build(path: Path, mb: int) -> str:
    with tarfile.open(path, "w:gz", compresslevel=6) as tar:
        source = Path(unpack_module.__file__).read_bytes()
        info = tarfile.TarInfo(SOURCE_IN_ARCHIVE)
        info.size = len(source)
        tar.addfile(info, io.BytesIO(source))
        info = tarfile.TarInfo("weights/zeros.bin")
        info.size = mb * MiB
        tar.addfile(info, io.BufferedReader(Zeros(info.size)))
        for i in range(10):
            data = os.urandom(mb * MiB // 10)
            info = tarfile.TarInfo(f"weights/random-{i}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            h.update(chunk)
    return h.hexdigest()


# Linux keeps a process's peak RSS across exec, and a forked child starts with its parent's pages:
# measured straight from this (large) process, every child would show this process's size.  So
# a small interpreter forks the command and reports the command's own peak (wait4's ru_maxrss, KiB).
PEAK = ("import os, sys\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.execvp(sys.argv[1], sys.argv[1:])\n"
        "_, status, usage = os.wait4(pid, 0)\n"
        "sys.stderr.write('peak-rss-kib %d\\n' % usage.ru_maxrss)\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n")


def peak_rss(argv, cwd) -> tuple:
    """(exit code, peak RSS of ``argv`` in MiB, its stderr)."""
    proc = subprocess.run([sys.executable, "-S", "-c", PEAK, *argv], cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    lines = proc.stderr.splitlines()
    kib = int(lines[-1].split()[1])
    return proc.returncode, kib / 1024, "\n".join(lines[:-1])


def measure(argv, cwd) -> tuple:
    start = time.perf_counter()
    code, mib, err = peak_rss(argv, cwd)
    elapsed = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"{argv[0]} failed: {err[-500:]}")
    return elapsed, mib


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=1024, help="size of the largest member, MiB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--python", default=sys.executable, help="the node's Python (3.8+)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-unpack-") as tmp:
        tmp = Path(tmp)
        archive = tmp / "code.tar.gz"
        digest = build(archive, args.mb)
        print(f"archive: {archive.stat().st_size / MiB:.1f} MiB packed, {args.mb * 2} MiB unpacked "
              f"(one {args.mb} MiB member of zeros, ten of {args.mb // 10} MiB random)")
        ours, tar = [], []
        for _round in range(args.rounds):
            for _label, argv, out in (
                    ("cloudtrain", bootstrap_argv(args.python, digest, str(archive), str(tmp / "dest")), ours),
                    ("tar", ["tar", "xzf", str(archive), "-C", str(tmp / "dest")], tar)):
                shutil.rmtree(tmp / "dest", ignore_errors=True)
                (tmp / "dest").mkdir()
                out.append(measure(argv, tmp))
        for label, runs in (("cloudtrain (check + unpack)", ours), ("tar xzf", tar)):
            times, rss = [t for t, _ in runs], [m for _, m in runs]
            print(f"{label:28} time median {statistics.median(times):.2f} s  peak RSS max {max(rss):.1f} MiB")
        worst = max(m for _, m in ours) * MiB / 1e6
        print(f"goal: peak RSS <= {GOAL_MB} MB: {'PASS' if worst <= GOAL_MB else 'MISS'} ({worst:.1f} MB)")
        return 0 if worst <= GOAL_MB else 1


if __name__ == "__main__":
    sys.exit(main())
