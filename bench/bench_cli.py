"""Benchmark 1: CLI cold start, `cloudtrain render` vs TorchX's dry run, and what render imports."""
from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from typing import Dict, List

from benchlib import BIN, EXAMPLE, REPO, Row, Stats, base_env, compared, find_torchx, rounds_order, show, \
    time_command

CLOUD_SDKS = ("boto3", "botocore", "azure", "kubernetes", "docker", "tencentcloud", "tencentcloud_sdk",
              "huaweicloud", "huaweicloudsdkcore", "sagemaker", "google.cloud")
GOAL = 0.3  # issue 38
JOB = "examples/digits-ddp/job.yaml"


def installed_providers(env) -> List[str]:
    _, code, out, err = time_command([f"{BIN}/cloudtrain", "providers", "-o", "json"], str(REPO), env)
    if code != 0:
        raise RuntimeError(f"cloudtrain providers failed: {err.strip()}")
    return [p["provider"] for p in json.loads(out)]


def run(ctx) -> List[Row]:
    env = base_env()
    providers = installed_providers(env)
    ctx.log(f"installed providers: {', '.join(providers)}")
    torchx = find_torchx(ctx.log)

    subjects: Dict[str, tuple] = {}
    for p in providers:
        subjects[f"cloudtrain:{p}"] = ([f"{BIN}/cloudtrain", "render", "-p", p, JOB], REPO)
    tx = torchx.exe or "torchx"
    # kubernetes needs a queue (Volcano) and no workspace (else it builds a Docker image first).
    anchors = {"torchx:kubernetes": ([tx, "run", "--workspace", "", "--dryrun", "-s", "kubernetes", "-cfg",
                                      "queue=default", "dist.ddp", "-j", "2x2", "--script", "train.py"], EXAMPLE),
               "torchx:local_cwd": ([tx, "run", "--dryrun", "-s", "local_cwd", "dist.ddp", "-j", "2x2",
                                     "--script", "train.py"], EXAMPLE)}
    failures: Dict[str, str] = {}
    subjects.update(anchors)
    if not torchx:
        failures.update({name: torchx.failure for name in anchors})

    rounds = 5 if ctx.quick else 10
    samples: Dict[str, List[float]] = defaultdict(list)
    names = [n for n in subjects if n not in failures]
    for name in names:  # warm-up (page cache, .pyc): not counted
        argv, cwd = subjects[name]
        _, code, _, err = time_command(argv, str(cwd), env)
        if code != 0:
            failures[name] = why(code, err)
            ctx.log(f"  {name} failed (exit {code}): {failures[name]}")
    for r in range(rounds):
        for name in rounds_order([n for n in names if n not in failures], r):
            argv, cwd = subjects[name]
            dt, code, _, err = time_command(argv, str(cwd), env)
            if code == 0:
                samples[name].append(dt)
            else:
                failures[name] = why(code, err)
    for name in names:
        if samples[name]:
            ctx.log(f"  {name}: median {statistics.median(samples[name]):.3f}s "
                    f"({min(samples[name]):.3f}-{max(samples[name]):.3f})")
    rows = cold_start_rows(providers, subjects, samples, failures)
    rows.extend(import_check(ctx, env))
    rows.append(sdk_check(ctx, env, providers))
    return rows


def why(code: int, err: str) -> str:
    """A failed command in one line: its last line of error output, else its exit code."""
    return err.strip().splitlines()[-1] if err.strip() else f"exit {code}"


def cold_start_rows(providers: List[str], subjects: Dict[str, tuple], samples: Dict[str, List[float]],
                    failures: Dict[str, str]) -> List[Row]:
    """One row per provider and TorchX scheduler: render's cold start against TorchX's dry run."""
    rows: List[Row] = []
    for p in providers:
        ours_name = f"cloudtrain:{p}"
        argv, cwd = subjects[ours_name]
        ours = Stats(samples[ours_name]) if samples.get(ours_name) else None
        for alt_name in ("torchx:kubernetes", "torchx:local_cwd"):
            alt_argv, alt_cwd = subjects[alt_name]
            alt = Stats(samples[alt_name]) if samples.get(alt_name) else None
            rows.append(compared("cli-cold-start", f"CLI cold start: `render -p {p}` vs TorchX dry run "
                                 f"({alt_name.split(':')[1]})", [show(argv, cwd)], ours, [show(alt_argv, alt_cwd)],
                                 alt, f"≤ {GOAL} × TorchX", lambda r: r <= GOAL,
                                 failures=[failures[ours_name]] if ours_name in failures else [],
                                 alt_failures=[failures[alt_name]] if alt_name in failures else [],
                                 alt_name=f"TorchX ({alt_name.split(':')[1]})"))
    return rows


# -- python -X importtime ------------------------------------------------------------------
LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)\s*$")


def parse_importtime(text: str):
    """[(self_us, cumulative_us, depth, module)] from `python -X importtime` output."""
    rows = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), (len(m.group(3)) - 1) // 2, m.group(4)))
    return rows


def is_cloud_sdk(module: str) -> bool:
    return any(module == s or module.startswith(s + ".") for s in CLOUD_SDKS) or \
        module.startswith(("tencentcloud", "huaweicloud"))


def import_check(ctx, env) -> List[Row]:
    argv = [f"{BIN}/python3", "-X", "importtime", "-m", "cloudtrain", "render", "-p", "local", JOB]
    runs = 3 if ctx.quick else 7
    totals, selfs, cumul = [], defaultdict(list), defaultdict(list)
    sdks = set()
    for _ in range(runs):
        _, code, _, err = time_command(argv, str(REPO), env)
        if code != 0:
            raise RuntimeError(f"importtime run failed: {err[-500:]}")
        rows = parse_importtime(err)
        # Everything the process imported: the top-level entries' cumulative times add up.
        totals.append(sum(c for _, c, depth, _ in rows if depth == 0) / 1000)
        for s, c, depth, mod in rows:
            selfs[mod].append(s / 1000)
            if depth == 0:
                cumul[mod].append(c / 1000)
            if is_cloud_sdk(mod):
                sdks.add(mod)
    top_self = sorted(((statistics.median(v), k) for k, v in selfs.items()), reverse=True)[:5]
    top_cum = sorted(((statistics.median(v), k) for k, v in cumul.items()), reverse=True)[:5]
    ctx.details.append(
        "**What `cloudtrain render -p local` imports** (`python -X importtime`, median of "
        f"{runs} runs; importtime's own bookkeeping inflates the numbers, compare them with each "
        "other rather than with wall times):\n\n"
        f"- total import time: {statistics.median(totals):.0f} ms (min {min(totals):.0f}, max {max(totals):.0f})\n"
        "- top 5 modules by own (self) time: "
        + ", ".join(f"`{m}` {t:.1f} ms" for t, m in top_self) + "\n"
        "- top 5 top-level imports by cumulative time: "
        + ", ".join(f"`{m}` {t:.1f} ms" for t, m in top_cum) + "\n"
        f"- cloud SDK modules imported: {', '.join(sorted(sdks)) or 'none'} "
        f"(checked: {', '.join(CLOUD_SDKS)})")
    ctx.log(f"  importtime total {statistics.median(totals):.0f} ms; cloud SDKs: {sorted(sdks) or 'none'}")
    return [Row("cli-cold-start", "`render -p local` imports no cloud SDK; total import time "
                "(`-X importtime`)", [show(argv, REPO)], Stats(totals, "ms"), goal="0 cloud SDK modules",
                passed=not sdks, note=f"{len(sdks)} cloud SDK modules imported"
                + (f": {', '.join(sorted(sdks)[:5])}" if sdks else "")
                + "; top self: " + ", ".join(f"{m} {t:.0f} ms" for t, m in top_self[:3]))]


def sdk_check(ctx, env, providers: List[str]) -> Row:
    """Render is a dry run: no provider's render may import a cloud SDK, its own or another's."""
    found: Dict[str, List[str]] = {}
    totals: Dict[str, float] = {}
    for p in providers:
        argv = [f"{BIN}/python3", "-X", "importtime", "-m", "cloudtrain", "render", "-p", p, JOB]
        _, code, _, err = time_command(argv, str(REPO), env)
        if code != 0:
            found[p] = [f"render failed: {why(code, err)}"]
            continue
        rows = parse_importtime(err)
        totals[p] = sum(c for _, c, depth, _ in rows if depth == 0) / 1000
        sdks = sorted({mod.split(".")[0] for _, _, _, mod in rows if is_cloud_sdk(mod)})
        if sdks:
            found[p] = sdks
    ctx.details.append(
        "**What `cloudtrain render -p P` imports, per provider** (`python -X importtime`, one run each): "
        + ", ".join(f"`{p}` {totals[p]:.0f} ms" for p in sorted(totals))
        + "; cloud SDK packages imported: "
        + ("; ".join(f"`{p}`: {', '.join(m)}" for p, m in sorted(found.items())) if found else "none") + ".")
    ctx.log(f"  SDK imports during render: {found or 'none'}")
    argv = [f"{BIN}/python3", "-X", "importtime", "-m", "cloudtrain", "render", "-p", "PROVIDER", JOB]
    return Row("cli-cold-start", f"`render -p P` imports no cloud SDK (its own or another provider's), "
               f"for each of the {len(providers)} providers", [show(argv, REPO)], None,
               goal="0 cloud SDK modules", passed=not found,
               note=("; ".join(f"{p}: {', '.join(m)}" for p, m in sorted(found.items())) if found
                     else "none imported: " + ", ".join(providers)))
