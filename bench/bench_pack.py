"""Packing a 1 GB code tree of large files: cloudtrain's archive against ``tar czf`` at the same
gzip level, side by side, and the packing process's peak memory.

    python bench/bench_pack.py [--gb 1] [--rounds 3]

The tree: eight files, half incompressible (random bytes: model weights, a tokenizer) and half
text that gzip shrinks about 3:1 (logs, CSV).  Each round packs it once with each tool, one after
the other in alternating order, from the page cache (the tree was just written, and is read once
before the first round).  cloudtrain's side is a fresh process that imports cloudtrain and calls
``shipping.archive`` (a job with ``code:`` the tree; the launcher bundle goes in too, as on every
cloud provider), timed from its start to its exit; its peak memory is its own ``VmHWM`` (Linux's
high-water mark of the process image).  The other side is ``tar --use-compress-program 'gzip -6'``
(GNU tar and gzip; level 6 is both gzip's default and ``shipping.COMPRESS_LEVEL``).
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import List, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

WORDS = ("epoch", "step", "loss", "0.4312", "lr", "3e-4", "rank", "node", "grad_norm", "1.0072", "INFO",
         "WARNING", "checkpoint", "saved", "train", "eval", "accuracy", "0.9639", "batch", "42", "seed")

PACK = textwrap.dedent("""
    import sys
    from cloudtrain.transfer import shipping
    from cloudtrain.input.loading import job_from_dict
    job = job_from_dict({"name": "bench", "code": sys.argv[1], "command": "python train.py"})
    archive = shipping.archive(job)
    peak = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
    print(archive.size, peak)
    """)


def make_tree(root: Path, gb: float) -> int:
    """``gb`` GB in eight files: four of random bytes, four of log-like text; the bytes written."""
    root.mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    each = int(gb * 1e9 / 8)
    rng = random.Random(7)
    text = ("\n".join(" ".join(rng.choice(WORDS) for _ in range(10)) for _ in range(80_000)) + "\n").encode()
    for i in range(4):
        with open(root / f"weights-{i}.bin", "wb") as f:
            for _ in range(each >> 22):
                f.write(os.urandom(4 << 20))
        with open(root / f"log-{i}.txt", "wb") as f:
            for _ in range(each // len(text)):
                f.write(text)
    return sum(p.stat().st_size for p in root.iterdir())


def read_once(root: Path) -> None:
    for p in root.iterdir():
        with open(p, "rb") as f:
            while f.read(8 << 20):
                pass


def pack_cloudtrain(root: Path) -> Tuple[float, int, int]:
    """Seconds, archive bytes, peak KiB of one packing process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), str(REPO / "plugins")]))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PACK, str(root)], capture_output=True, text=True, env=env)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    size, peak = map(int, proc.stdout.split())
    return took, size, peak


def pack_tar(root: Path, out: Path) -> Tuple[float, int]:
    t0 = time.perf_counter()
    subprocess.run(["tar", "--use-compress-program", "gzip -6", "-cf", str(out), "-C", str(root), "."], check=True)
    took = time.perf_counter() - t0
    size = out.stat().st_size
    out.unlink()
    return took, size


def measure(tmp: Path, gb: float, rounds: int, log=print) -> dict:
    root = tmp / "tree"
    total = make_tree(root, gb)
    read_once(root)
    ours, theirs, peaks, sizes = [], [], [], {}
    for r in range(rounds):
        order = ("cloudtrain", "tar") if r % 2 == 0 else ("tar", "cloudtrain")
        for who in order:
            if who == "cloudtrain":
                took, size, peak = pack_cloudtrain(root)
                ours.append(took)
                peaks.append(peak / 1024)
            else:
                took, size = pack_tar(root, tmp / "tree.tar.gz")
                theirs.append(took)
            sizes[who] = size
            log(f"pack round {r + 1}: {who} {took:.2f} s, {size / 1e6:.0f} MB")
    shutil.rmtree(root)
    return {"bytes": total, "ours": ours, "theirs": theirs, "peaks": peaks, "sizes": sizes}


def run(ctx) -> List:
    from benchlib import Row, Stats, compared
    gb, rounds = (0.25, 1) if ctx.quick else (1.0, 3)
    cmd = [f"python -c 'shipping.archive(job)'  # {gb:g} GB tree, a fresh process"]
    alt = [f"tar --use-compress-program 'gzip -6' -cf tree.tar.gz .  # {gb:g} GB tree"]
    try:
        m = measure(ctx.tmp / "pack", gb, rounds, ctx.log)
    except Exception as exc:  # noqa: BLE001 -- a failed measurement is a FAIL row, never a ratio
        return [Row("pack", "packing a 1 GB tree of large files", cmd, None, alt, None, goal="≤ 1.1 × tar czf",
                    failure=str(exc))]
    sizes = m["sizes"]
    note = (f"{m['bytes'] / 1e9:.2f} GB in 8 files (half random bytes, half log text); archive "
            f"{sizes['cloudtrain'] / 1e6:.0f} MB (tar czf: {sizes['tar'] / 1e6:.0f} MB)")
    time_row = compared("pack", "packing a 1 GB tree of large files: time", cmd, Stats(m["ours"]), alt,
                        Stats(m["theirs"]), goal="≤ 1.1 × tar czf", meets=lambda r: r <= 1.1,
                        alt_name="tar czf", note=note)
    peak = Stats(m["peaks"], "MB")
    memory_row = Row("pack", "packing a 1 GB tree of large files: peak RSS of the packing process", cmd, peak,
                     goal="≤ 100 MB", passed=peak.max <= 100,
                     note="VmHWM of the process (Python, cloudtrain's imports and the packing)")
    return [time_row, memory_row]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ct-bench-pack-", dir=os.environ.get("TMPDIR", "/var/tmp")) as tmp:
        m = measure(Path(tmp), args.gb, args.rounds)
    ours, theirs = statistics.median(m["ours"]), statistics.median(m["theirs"])
    print(f"{m['bytes'] / 1e9:.2f} GB tree, median of {args.rounds}: cloudtrain {ours:.2f} s, tar czf {theirs:.2f} s, "
          f"ratio {ours / theirs:.3f}; peak RSS {max(m['peaks']):.0f} MB; "
          f"archive {m['sizes']['cloudtrain'] / 1e6:.0f} MB "
          f"(tar czf {m['sizes']['tar'] / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
