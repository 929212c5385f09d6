"""Nodes' working copies of a large code tree: a full copy per node (before) against one copy
plus hard links (``cloudtrain.transfer.codetree.working_copies``), and with a ``.cloudtrainignore``.

    python bench/bench_codecopy.py [--gb 1] [--nodes 2] [--rounds 3]

Prints, per variant, the median seconds and the bytes the copies take on disk (blocks that the
copies added, so a hard link counts nothing).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from cloudtrain.transfer.codetree import NOT_COPIED, working_copies  # noqa: E402


def make_tree(root: Path, gb: float) -> None:
    """``gb`` GiB of data in 4 MiB files under data/, plus a few hundred small source files."""
    (root / "data").mkdir(parents=True)
    chunk = os.urandom(4 << 20)
    for i in range(int(gb * 256)):
        (root / "data" / f"shard-{i:04d}.bin").write_bytes(chunk)
    for i in range(300):
        (root / "src" / f"pkg{i % 10}").mkdir(parents=True, exist_ok=True)
        (root / "src" / f"pkg{i % 10}" / f"mod{i}.py").write_text("x = 1\n" * 200)
    (root / "train.py").write_text("print('hi')\n")


def disk_bytes(paths) -> int:
    """Allocated bytes of the files under ``paths``, each inode counted once."""
    seen, total = set(), 0
    for p in paths:
        for dirpath, _, files in os.walk(p):
            for f in files:
                st = os.lstat(os.path.join(dirpath, f))
                if st.st_ino not in seen:
                    seen.add(st.st_ino)
                    total += st.st_blocks * 512
    return total


def copy_per_node(src: Path, dests) -> None:
    for d in dests:
        shutil.copytree(src, d, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ct-bench-copy-", dir=os.environ.get("TMPDIR", "/var/tmp")) as tmp:
        tmp = Path(tmp)
        src = tmp / "code"
        make_tree(src, args.gb)
        variants = {
            "full copy per node (before)": lambda dests: copy_per_node(src, dests),
            "one copy + hard links": lambda dests: working_copies(src, dests),
        }
        rows = []
        for name, fn in [*variants.items(), ("hard links + .cloudtrainignore data/", None)]:
            times, size = [], 0
            for r in range(args.rounds):
                if fn is None:
                    (src / ".cloudtrainignore").write_text("data/\n")
                    run = lambda dests: working_copies(src, dests)  # noqa: E731
                else:
                    (src / ".cloudtrainignore").unlink(missing_ok=True)
                    run = fn
                dests = [tmp / f"run{r}" / f"node-{i}" for i in range(args.nodes)]
                os.sync()
                t0 = time.perf_counter()
                run(dests)
                os.sync()  # what was written reaches the disk: part of the cost
                times.append(time.perf_counter() - t0)
                size = disk_bytes(dests)
                shutil.rmtree(tmp / f"run{r}")
            rows.append((name, statistics.median(times), size))
        base = rows[0][1]
        print(f"{args.gb:g} GiB tree, {args.nodes} nodes, median of {args.rounds}")
        for name, t, size in rows:
            print(f"  {name:40s} {t:7.2f} s  ({t / base:5.3f} x)  {size / 2**20:8.0f} MiB on disk")
    return 0


if __name__ == "__main__":
    sys.exit(main())
