"""Benchmark: `cloudtrain render` and `cloudtrain validate` of the digits job, for every installed
provider, and `cloudtrain --help`, against the import floor, `python -c "import pydantic, yaml,
pluggy"` (what any run of the CLI must import at least), side by side in interleaved rounds,
medians of N runs; the goals are <= 1.5 x the floor for render and validate, <= 1.2 x for --help
(issues 29 and 38).

Both sides run with byte-code caching on (a warm-up run writes the `.pyc` files, as an installed
package has them), whatever this shell's `PYTHONDONTWRITEBYTECODE` says.

`import pydantic` is lazy: it imports none of pydantic's model machinery (``pydantic.main``, its
schema builder, its plugin loader and ``importlib.metadata``), which any validation of a job by a
pydantic model needs.  Informational rows compare `render -p local` and `validate -p local` with a
second floor that builds and uses one one-field model (`MODEL_FLOOR`), to show how much of the
gap is that machinery."""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Dict, List, Sequence

from benchlib import BIN, REPO, Row, Stats, base_env, compared, rounds_order, show, time_command

GOAL = 1.5
HELP_GOAL = 1.2
JOB = "examples/digits-ddp/job.yaml"
FLOOR = "floor"
MODEL_FLOOR = "model-floor"
HELP = "help"
COMMANDS = ("render", "validate")
INFORMATIONAL = "local"  # the provider whose rows are also set against the model floor
# What a cloud provider needs set for `validate` of the digits job to pass (example values; all
# offline), given to render too, so that both measure the same job.
SETTINGS = {
    "sagemaker": {"output_s3": "s3://ct-bench/runs", "region": "us-east-1",
                  "role_arn": "arn:aws:iam::123456789012:role/train"},
    "ec2": {"code_s3": "s3://ct-bench/code", "region": "us-east-1", "instance_profile": "cloudtrain-node",
            "image_id": "ami-0123456789abcdef0"},
    "eks": {"cluster": "ct-bench", "region": "us-east-1"},
    "azure": {"subscription_id": "00000000-0000-0000-0000-000000000000", "resource_group": "ct-bench",
              "workspace": "ct-bench"},
    "tione": {"code_store": "cos://ct-bench-1250000000/code", "region": "ap-shanghai"},
    "modelarts": {"code_store": "obs://ct-bench/code/", "region": "cn-north-4"},
}


def subjects(providers: Sequence[str]) -> Dict[str, List[str]]:
    """name -> argv: the floors, `--help`, and `render` / `validate` of each provider (``"render:local"``)."""
    argvs = {FLOOR: [f"{BIN}/python3", "-c", "import pydantic, yaml, pluggy"],
             MODEL_FLOOR: [f"{BIN}/python3", "-c", "import pydantic, yaml, pluggy; "
                           "pydantic.create_model('M', x=(int, 1))(x=2)"],
             HELP: [f"{BIN}/cloudtrain", "--help"]}
    for p in providers:
        for command in COMMANDS:
            argvs[f"{command}:{p}"] = [f"{BIN}/cloudtrain", command, "-p", p, JOB] + [
                f"--set=providers.{p}.{key}={value}" for key, value in SETTINGS.get(p, {}).items()]
    return argvs


def run(ctx) -> List[Row]:
    from bench_cli import installed_providers
    env = {k: v for k, v in base_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    providers = installed_providers(env)
    argvs = subjects(providers)
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
    return floor_rows(providers, argvs, samples, failures)


def last_line(code: int, err: str) -> str:
    return err.strip().splitlines()[-1] if err.strip() else f"exit {code}"


def floor_rows(providers: Sequence[str], argvs: Dict[str, List[str]], samples: Dict[str, Sequence[float]],
               failures: Dict[str, List[str]]) -> List[Row]:
    """`--help`'s row, then one row per provider and command: its median cold start over the
    floor's, judged by ``HELP_GOAL`` / ``GOAL``; a failed floor or command run is a FAIL with the
    reason, never a ratio.  Then the informational rows against the model floor."""
    floor = Stats(list(samples[FLOOR])) if samples.get(FLOOR) else None

    def row(name: str, what: str, goal: float, alt_name: str = FLOOR) -> Row:
        ours = Stats(list(samples[name])) if samples.get(name) else None
        alt = Stats(list(samples[alt_name])) if samples.get(alt_name) else None
        if alt_name == MODEL_FLOOR:
            return compared("cold-start-floor", what, [show(argvs[name], REPO)], ours, [show(argvs[alt_name])],
                            alt, failures=failures.get(name, []), alt_failures=failures.get(alt_name, []),
                            alt_name="the model floor", name=f"cloudtrain {name}")
        note = (f"floor median {floor.median * 1000:.0f} ms, {name} {ours.median * 1000:.0f} ms"
                if floor and ours else "")
        return compared("cold-start-floor", what, [show(argvs[name], REPO)], ours, [show(argvs[FLOOR])], floor,
                        f"≤ {goal} × floor", lambda r: r <= goal, failures=failures.get(name, []),
                        alt_failures=failures.get(FLOOR, []), alt_name="the import floor", note=note,
                        name=f"cloudtrain {name}")

    rows = [row(HELP, "`--help`: cold start vs the import floor", HELP_GOAL)]
    for p in providers:
        for command in COMMANDS:
            rows.append(row(f"{command}:{p}", f"`{command} -p {p}` of the digits job: cold start vs the import floor",
                            GOAL))
    if INFORMATIONAL in providers:
        for command in COMMANDS:
            rows.append(row(f"{command}:{INFORMATIONAL}", f"`{command} -p {INFORMATIONAL}`: cold start vs a floor "
                            "that also builds one pydantic model (informational)", GOAL, MODEL_FLOOR))
    return rows
