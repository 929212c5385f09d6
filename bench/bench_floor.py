"""Benchmark: `cloudtrain render` and `cloudtrain validate` of a small job against the import floor,
`python -c "import pydantic, yaml, pluggy"` (what any run of the CLI must import at least), side by
side in interleaved rounds, medians of N runs; the goal is <= 1.5 x the floor (issue 29).

Both sides run with byte-code caching on (a warm-up run writes the `.pyc` files, as an installed
package has them), whatever this shell's `PYTHONDONTWRITEBYTECODE` says.

`import pydantic` is lazy: it imports none of pydantic's model machinery (``pydantic.main``, its
schema builder, its plugin loader and ``importlib.metadata``), which any validation of a job by a
pydantic model needs.  Informational rows compare the same commands with a second floor that builds
and uses one one-field model (`MODEL_FLOOR`), to show how much of the gap is that machinery."""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Dict, List, Sequence

from benchlib import BIN, REPO, Row, Stats, base_env, compared, rounds_order, show, time_command

GOAL = 1.5
JOB = "examples/digits-ddp/job.yaml"
FLOOR = "floor"
MODEL_FLOOR = "model-floor"


def subjects() -> Dict[str, List[str]]:
    """name -> argv: the floor and the two commands measured against it."""
    return {FLOOR: [f"{BIN}/python3", "-c", "import pydantic, yaml, pluggy"],
            MODEL_FLOOR: [f"{BIN}/python3", "-c", "import pydantic, yaml, pluggy; "
                          "pydantic.create_model('M', x=(int, 1))(x=2)"],
            "render": [f"{BIN}/cloudtrain", "render", "-p", "local", JOB],
            "validate": [f"{BIN}/cloudtrain", "validate", JOB]}


def run(ctx) -> List[Row]:
    env = {k: v for k, v in base_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    argvs = subjects()
    failures: Dict[str, List[str]] = defaultdict(list)
    for name, argv in argvs.items():  # warm-up: page cache and .pyc files, not counted
        _, code, _, err = time_command(argv, str(REPO), env)
        if code != 0:
            failures[name].append(last_line(code, err))
    rounds = 7 if ctx.quick else 21
    samples: Dict[str, List[float]] = defaultdict(list)
    for r in range(rounds):
        for name in rounds_order([n for n in argvs if n not in failures], r):
            dt, code, _, err = time_command(argvs[name], str(REPO), env)
            if code == 0:
                samples[name].append(dt)
            else:
                failures[name].append(last_line(code, err))
    for name in argvs:
        if samples[name]:
            ctx.log(f"  {name}: median {statistics.median(samples[name]):.3f}s over {len(samples[name])} runs")
    return floor_rows(argvs, samples, failures)


def last_line(code: int, err: str) -> str:
    return err.strip().splitlines()[-1] if err.strip() else f"exit {code}"


def floor_rows(argvs: Dict[str, List[str]], samples: Dict[str, Sequence[float]],
               failures: Dict[str, List[str]]) -> List[Row]:
    """One row per command: its median cold start over the floor's, judged by ``GOAL``; a failed
    floor or command run is a FAIL with the reason, never a ratio."""
    floor = Stats(list(samples[FLOOR])) if samples.get(FLOOR) else None
    rows = []
    for name in ("render", "validate"):
        ours = Stats(list(samples[name])) if samples.get(name) else None
        note = (f"floor median {floor.median * 1000:.0f} ms, {name} {ours.median * 1000:.0f} ms"
                if floor and ours else "")
        rows.append(compared("cold-start-floor", f"`{name}` of a small job: cold start vs the import floor",
                             [show(argvs[name], REPO)], ours, [show(argvs[FLOOR])], floor,
                             f"≤ {GOAL} × floor", lambda r: r <= GOAL, failures=failures.get(name, []),
                             alt_failures=failures.get(FLOOR, []), alt_name="the import floor", note=note,
                             name=f"cloudtrain {name}"))
    model = Stats(list(samples[MODEL_FLOOR])) if samples.get(MODEL_FLOOR) else None
    for name in ("render", "validate"):
        ours = Stats(list(samples[name])) if samples.get(name) else None
        rows.append(compared("cold-start-floor", f"`{name}`: cold start vs a floor that also builds one pydantic "
                             "model (informational)", [show(argvs[name], REPO)], ours, [show(argvs[MODEL_FLOOR])],
                             model, failures=failures.get(name, []), alt_failures=failures.get(MODEL_FLOOR, []),
                             alt_name="the model floor", name=f"cloudtrain {name}"))
    return rows
