"""Benchmark 4: `cloudtrain.render(job, provider)` in-process, for 1 .. 1024 nodes."""
from __future__ import annotations

import time
from typing import Dict, List

from benchlib import EXAMPLE, Row, Stats, ratio_of

NODES = (1, 8, 64, 512, 1024)
RATIO_GOAL = 10.0
ABS_GOAL_MS = 100.0
CODE = ("import time, cloudtrain\n"
        "job = cloudtrain.load_job('examples/digits-ddp/job.yaml', overrides={'distribution.nodes': N})\n"
        "t = time.perf_counter(); cloudtrain.render(job, PROVIDER); dt = time.perf_counter() - t")


def run(ctx) -> List[Row]:
    import cloudtrain
    from cloudtrain.spec.errors import CloudtrainError
    from cloudtrain.extend.plugins import providers

    rounds = 7 if ctx.quick else 25
    rows: List[Row] = []
    for provider in providers():
        jobs = {n: cloudtrain.load_job(EXAMPLE / "job.yaml", overrides={"distribution.nodes": n}) for n in NODES}
        try:
            for n in NODES:  # warm-up: first calls build pydantic validators, import the plugin
                cloudtrain.render(jobs[n], provider)
        except CloudtrainError as exc:
            rows.append(Row("render-scaling", f"`render(job, {provider!r})`", [CODE], None,
                            goal=f"1024 nodes ≤ {RATIO_GOAL:g} × 8 nodes",
                            failure=f"the digits job does not render for {provider}: {exc}"))
            continue
        samples: Dict[int, List[float]] = {n: [] for n in NODES}
        for r in range(rounds):  # interleaved: every round times each size once, in a rotating order
            order = NODES[r % len(NODES):] + NODES[:r % len(NODES)]
            for n in order:
                t = time.perf_counter()
                cloudtrain.render(jobs[n], provider)
                samples[n].append((time.perf_counter() - t) * 1000)
        stats = {n: Stats(samples[n], "ms") for n in NODES}
        ctx.log(f"  {provider}: " + ", ".join(f"{n}: {stats[n].median:.3f} ms" for n in NODES))
        code = CODE.replace("PROVIDER", repr(provider))
        ratio = ratio_of(stats[1024], stats[8])
        rows.append(Row("render-scaling", f"`render(job, {provider!r})` 1024 nodes vs 8 nodes (in-process)",
                        [code.replace("N}", "1024}")], stats[1024], [code.replace("N}", "8}")], stats[8], ratio,
                        f"≤ {RATIO_GOAL:g} × the 8-node cost", None if ratio is None else ratio <= RATIO_GOAL,
                        note=f"linear scaling would be {1024 / 8:.0f}×; per node: "
                             f"{stats[64].median / 64 * 1000:.1f} µs at 64 nodes, "
                             f"{stats[1024].median / 1024 * 1000:.1f} µs at 1024"))
        rows.append(Row("render-scaling", f"`render(job, {provider!r})` 1024 nodes, absolute",
                        [code.replace("N}", "1024}")], stats[1024], ratio=stats[1024].median / ABS_GOAL_MS,
                        goal=f"≤ {ABS_GOAL_MS:g} ms (ratio: value / goal)",
                        passed=stats[1024].median <= ABS_GOAL_MS))
        lines = [f"**Render scaling, `{provider}`** (median of {rounds} interleaved calls, ms):", "",
                 "| nodes | median | min – max | per node | × 8-node cost |", "|---:|---:|---:|---:|---:|"]
        for n in NODES:
            s = stats[n]
            lines.append(f"| {n} | {s.median:.3f} | {s.min:.3f} – {s.max:.3f} | {s.median / n * 1000:.1f} µs | "
                         f"{s.median / stats[8].median:.1f} |")
        ctx.details.append("\n".join(lines))
    return rows

