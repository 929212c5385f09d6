"""Benchmark: ``cloudtrain.launch.report`` on the training loop's thread (issue 43: <= 5 us a call).

A loop of N iterations that calls ``report(step=i, total_steps=N, loss=..., samples_per_s=...)``
side by side with the same loop without the call and with a call to a no-op function of the
same signature (what any Python call costs on the machine), in interleaved rounds; the cost of a call is
the difference of the medians over N.  The reports' lines (one a second at most, written by the
reporter's thread) go to standard error, here a pipe to /dev/null as a node's log would be.

Then the other side of progress: reading it from a log of 100,000 reports, as ``status`` does.

Run: ``python bench/bench_report.py [N] [ROUNDS]`` (stand-alone; it prints one line per side and
the cost of a call).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "core"))

from cloudtrain.launch import flush_report, report  # noqa: E402

GOAL_US = 5.0


def bare(n: int) -> float:
    t0 = time.perf_counter()
    loss = 1.0
    for _ in range(n):
        loss = loss * 0.9999 + 1e-6
    return time.perf_counter() - t0


def _noop(step=None, total_steps=None, epoch=None, total_epochs=None, **metrics):
    return None


def calling(n: int) -> float:
    """The same loop with a call to a function that does nothing, with the same arguments: what
    any Python call costs on this machine (the floor ``report`` is compared with)."""
    t0 = time.perf_counter()
    loss = 1.0
    for i in range(n):
        loss = loss * 0.9999 + 1e-6
        _noop(step=i, total_steps=n, loss=loss, samples_per_s=412.0)
    return time.perf_counter() - t0


def reporting(n: int) -> float:
    t0 = time.perf_counter()
    loss = 1.0
    for i in range(n):
        loss = loss * 0.9999 + 1e-6
        report(step=i, total_steps=n, loss=loss, samples_per_s=412.0)
    return time.perf_counter() - t0


def reading(reports: int = 100_000, rounds: int = 20) -> None:
    """What ``status`` adds for a job whose log holds ``reports`` report lines: reading its
    progress from the log's tail (``cloudtrain.runtime.progress.from_file``), median of rounds."""
    import tempfile
    from cloudtrain.launch.report import line
    from cloudtrain.runtime.progress import from_file
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "job.log"
        with open(log, "w") as f:
            for i in range(1, reports + 1):
                f.write("[node0/rank0] " + line(1000.0 + i, (i, reports, None, None), {"loss": 1.0 / i}) + "\n")
        samples = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            found = from_file(log)
            samples.append(time.perf_counter() - t0)
        assert found is not None and found.step == reports
        print(f"progress of a {log.stat().st_size >> 20} MiB log of {reports} reports: "
              f"median {statistics.median(samples) * 1e3:.2f} ms")


def main(n: int = 200_000, rounds: int = 7) -> int:
    sides = {"bare loop": [], "no-op call each iteration": [], "report() each iteration": []}
    for _ in range(rounds):
        sides["bare loop"].append(bare(n))
        sides["no-op call each iteration"].append(calling(n))
        sides["report() each iteration"].append(reporting(n))
    flush_report()
    med = {name: statistics.median(samples) for name, samples in sides.items()}
    for name, value in med.items():
        print(f"{name:26s} median {value * 1e3:8.2f} ms for {n} iterations ({value / n * 1e6:.3f} us each)")
    cost = (med["report() each iteration"] - med["bare loop"]) / n * 1e6
    call = (med["no-op call each iteration"] - med["bare loop"]) / n * 1e6
    verdict = "PASS" if cost <= GOAL_US else "MISS"
    print(f"report() costs {cost:.3f} us a call (goal <= {GOAL_US} us): {verdict}; "
          f"a no-op call with the same arguments costs {call:.3f} us on this machine "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    reading()
    return 0


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    sys.exit(main(*args))
