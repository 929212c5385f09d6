#!/usr/bin/env python3
"""cloudtrain's benchmark suite: `python bench/run.py [--quick] [--only NAME ...]`.

Runs the benchmarks of the registry below, prints one markdown table, and (on a run of the
whole suite, --quick too) writes it into docs/performance.md between `<!-- BENCH TABLE -->` and
`<!-- /BENCH TABLE -->`. Not part of the test run (no test_*.py files here).

First it pip-installs into this interpreter's environment what the suite needs and lacks (the
digits example's torch and scikit-learn, boto3, moto's server, the Docker SDK, as cloudtrain's
extras pin them; --no-install only says what to run), and TorchX into a venv of its own.
A row whose anchor (TorchX, bare torchrun, boto3 alone) or own runs failed is a **FAIL** with
the reason, never a ratio; the suite then exits 1.

Adding a benchmark: write `bench/bench_<topic>.py` with a function `run(ctx) -> list[Row]`
(`benchlib.Row`: the commands measured, a `Stats` of samples for cloudtrain and for the
alternative run side by side, the ratio, the goal, PASS/MISS), then add one `Benchmark(...)`
line to BENCHMARKS. `ctx` gives: `quick`, `tmp` (a scratch dir removed at the end), `log()`,
`details` (markdown paragraphs printed under the table), `shared` (a dict benchmarks use to
share runs), `deadline` / `reserve_after(name)` (the time budget).
"""
from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, Row, find_torchx, install_requirements, load_average, machine, \
    package_version  # noqa: E402


@dataclass(frozen=True)
class Benchmark:
    name: str
    target: str          # "module:function" in bench/, called with the context, returns [Row]
    title: str
    estimate: float      # seconds it takes in a full run (budgeting)
    quick_estimate: float


# The registry: table order = run order.
BENCHMARKS: List[Benchmark] = [
    Benchmark("cli-cold-start", "bench_cli:run",
              "CLI cold start: `cloudtrain render` vs TorchX's dry run; what render imports", 50, 30),
    Benchmark("cold-start-floor", "bench_floor:run",
              "`--help`, and `render` / `validate` of the digits job for every provider, vs the import floor "
              "(`python -c \"import pydantic, yaml, pluggy\"`)",
              150, 50),
    Benchmark("launch-overhead", "bench_launch:run_overhead",
              "digits DDP job: cloudtrain submit -p local vs bare torchrun vs torchx local_cwd", 220, 150),
    Benchmark("throughput", "bench_launch:run_throughput",
              "steps/s of a 30-epoch digits job under cloudtrain launch vs bare torchrun", 125, 85),
    Benchmark("render-scaling", "bench_render:run",
              "cloudtrain.render() in-process for 1 .. 1024 nodes, each installed provider", 15, 6),
    Benchmark("docker", "bench_docker:run",
              "digits DDP 2x2 job: cloudtrain submit -p docker vs -p local vs torchx local_docker", 160, 100),
    Benchmark("resume", "bench_resume:run",
              "digits DDP 2x1 with a checkpoint: a killed rank to the first step of the restarted job "
              "vs the cold start",
              150, 60),
    Benchmark("pack", "bench_pack:run",
              "packing a 1 GB tree of large files: the code archive vs tar czf at the same gzip level; peak RSS",
              300, 40),
    Benchmark("sagemaker-submit", "bench_submit:run",
              "200 jobs submitted to the SageMaker double (moto server), 16 threads; API calls per job", 40, 20),
    Benchmark("slurm", "bench_slurm:run",
              "slurm: `submit` of the digits job vs bare `sbatch` (wall to the job id); its first training step "
              "vs bare `srun torchrun`, on a two-node Slurm on this machine", 200, 110),
    Benchmark("ledger-list", "bench_ledger:run",
              "`cloudtrain list` over a ledger of 10,000 jobs vs the CLI's cold start (`render -p local`)", 40, 25),
]
BY_NAME: Dict[str, Benchmark] = {b.name: b for b in BENCHMARKS}
DOCS = REPO / "docs" / "performance.md"
START, END = "<!-- BENCH TABLE -->", "<!-- /BENCH TABLE -->"


@dataclass
class Context:
    quick: bool
    tmp: Path
    deadline: float                   # time.monotonic() by which the suite should be done
    selected: List[str]
    shared: Dict[str, object] = field(default_factory=dict)
    details: List[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def log(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", file=sys.stderr, flush=True)

    def reserve_after(self, name: str) -> float:
        """Seconds to keep for the selected benchmarks that run after ``name``."""
        names = [b.name for b in BENCHMARKS if b.name in self.selected]
        later = names[names.index(name) + 1:] if name in names else []
        return sum(BY_NAME[n].quick_estimate if self.quick else BY_NAME[n].estimate for n in later)


def cell(lines: List[str]) -> str:
    return "<br>".join(f"`{x.replace('`', '').replace(chr(10), '; ')}`" for x in lines) if lines else "—"


def table(rows: List[Row]) -> str:
    out = ["| # | benchmark | cloudtrain: command | median | min – max | alternative: command | median | "
           "min – max | ratio | goal | result |",
           "|---|---|---|---:|---|---|---:|---|---:|---|---|"]
    for i, r in enumerate(rows, 1):
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "—"
        out.append("| " + " | ".join([
            str(i), f"{r.bench}: {r.what}", cell(r.commands),
            r.value.median_text() if r.value else "—", r.value.range_text() if r.value else "—",
            cell(r.alt_commands), r.alt.median_text() if r.alt else "—", r.alt.range_text() if r.alt else "—",
            ratio, r.goal, r.result]).replace("\n", " ") + " |")
    notes = [f"{i}. {r.note}" for i, r in enumerate(rows, 1) if r.note]
    if notes:
        out += ["", "Notes by row:", ""] + [f"- row {n}" for n in notes]
    return "\n".join(out)


def summarize(rows: List[Row]) -> str:
    passed = sum(1 for r in rows if r.passed)
    failed = sum(1 for r in rows if r.failure)
    missed = sum(1 for r in rows if r.passed is False) - failed
    return (f"**{passed} PASS, {missed} MISS, {failed} FAIL** ({len(rows) - passed - missed - failed} "
            "informational rows).")


def report(ctx: Context, rows: List[Row], info: Dict[str, str], load_before: str, elapsed: float,
           errors: List[str]) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"Last run: {when}, `python bench/run.py{' --quick' if ctx.quick else ''}"
            f"{' --only ' + ' '.join(ctx.selected) if len(ctx.selected) < len(BENCHMARKS) else ''}` "
            f"in {elapsed:.0f} s. Machine: {info.get('cores')} cores ({info.get('cpu', '?')}), "
            f"{info.get('memory', '?')} memory, Linux {info.get('kernel')}, Python {info.get('python')}, "
            f"torch {info.get('torch')}, cloudtrain {info.get('cloudtrain')}"
            + (f", torchx {info['torchx']}" if info.get("torchx") else "")
            + f". Load average (1, 5, 15 min) before: {load_before}; after: {load_average()} "
            "(other work on the machine shows up as noise: compare the min – max ranges).")
    summary = summarize(rows)
    parts = [head, summary, table(rows)] + ctx.details
    if errors:
        parts.append("**Errors:**\n\n" + "\n".join(f"- {e}" for e in errors))
    return "\n\n".join(parts)


def write_docs(text: str) -> None:
    page = DOCS.read_text(encoding="utf-8")
    if START not in page:
        page = page.rstrip("\n") + "\n\n" + START + "\n"
    before, _, rest = page.partition(START)
    after = rest.partition(END)[2] if END in rest else "\n"
    DOCS.write_text(f"{before}{START}\n\n{text}\n\n{END}{after if after.strip() else chr(10)}", encoding="utf-8")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run, ~4 minutes)")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="run only this benchmark (repeatable or comma-separated); see --list")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--budget", type=float, default=570.0,
                   help="seconds the whole suite may take; adaptive benchmarks stop early (default 570)")
    p.add_argument("--docs", dest="docs", action="store_true", default=None,
                   help="write docs/performance.md even with --only")
    p.add_argument("--no-docs", dest="docs", action="store_false", help="do not write docs/performance.md")
    p.add_argument("--no-install", action="store_true",
                   help="do not pip-install what the suite lacks; say what to run instead")
    args = p.parse_args(argv)
    if args.list:
        for b in BENCHMARKS:
            print(f"{b.name:28s} {b.title}")
        return 0
    only = [n.strip() for item in args.only for n in item.split(",") if n.strip()]
    unknown = [n for n in only if n not in BY_NAME]
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    selected = [b.name for b in BENCHMARKS if not only or b.name in only]
    write = args.docs if args.docs is not None else not only

    tmp = Path(tempfile.mkdtemp(prefix="cloudtrain-bench-"))
    ctx = Context(quick=args.quick, tmp=tmp, deadline=time.monotonic() + args.budget, selected=selected)
    missing = install_requirements(ctx.log, install=not args.no_install)
    if {"cli-cold-start", "launch-overhead", "docker"} & set(selected):  # their anchor
        find_torchx(ctx.log, install=not args.no_install)
    ctx.deadline = time.monotonic() + args.budget  # installing is not part of the budget
    load_before = load_average()
    info = machine()
    rows: List[Row] = []
    errors: List[str] = []
    try:
        for name in selected:
            bench = BY_NAME[name]
            ctx.log(f"== {name}: {bench.title}")
            module, _, func = bench.target.partition(":")
            try:
                rows.extend(getattr(importlib.import_module(module), func)(ctx))
            except Exception as exc:  # one broken benchmark must not lose the others' results
                traceback.print_exc()
                errors.append(f"{name}: {exc.__class__.__name__}: {exc}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    torchx = find_torchx(ctx.log, install=False)
    if torchx:
        info["torchx"] = package_version("torchx", str(Path(torchx.exe).parent / "python"))
    if missing:
        errors.append(f"not installed: {', '.join(missing)}")
    elapsed = time.monotonic() - ctx.started
    text = report(ctx, rows, info, load_before, elapsed, errors)
    print(text)
    if write:
        write_docs(text)
        ctx.log(f"wrote the table into {DOCS.relative_to(REPO)}")
    failed = [r for r in rows if r.failure]
    ctx.log(f"done in {elapsed:.0f} s" + (f"; {len(failed)} rows FAILED" if failed else ""))
    return 1 if errors or failed else 0


if __name__ == "__main__":
    sys.exit(main())
