"""What resolving ``resources.accelerator`` adds to a render, and the catalog lookup with prices
that ``validate``/``submit`` add for the estimate (goal: < 5 ms each, issues 27 and 31).

    PYTHONPATH=core:plugins python bench/bench_resources.py [--rounds N]

Two measurements per provider with a catalog:
- in process, cold: the catalog file read and parsed (its cache cleared) plus the choice;
- in process, cold, with prices: the same plus ``cloudtrain.catalogs.prices.estimate`` (the row's rate in
  the job's region, nodes x rate, the ceiling) - what a render with an estimate pays;
- ``render`` as a fresh process (the cold start a user sees), the job with ``accelerator: A100``
  and ``gpus_per_node: 8`` against the same job naming the provider's instance type, which reads
  the same catalog to check it, and against a job without GPUs (no catalog read at all):
  medians of interleaved rounds, and their difference.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROVIDERS = {"sagemaker": ("instance_type", "ml.p4d.24xlarge"), "ec2": ("instance_type", "p4d.24xlarge"),
             "azure": ("vm_size", "Standard_ND96asr_v4"), "eks": ("instance_type", "p4d.24xlarge")}
BASE = {"name": "bench", "command": "python train.py", "image": "registry.example/train:1", "code": ".",
        "distribution": {"type": "ddp", "nodes": 2}, "providers": {"eks": {"cluster": "c"}}}


def in_process(provider: str, with_prices: bool = False) -> float:
    from cloudtrain.catalogs import catalog
    from cloudtrain.catalogs.instances import choose
    from cloudtrain.input.loading import job_from_dict
    from cloudtrain.extend.plugins import get_provider_class
    from cloudtrain.catalogs.prices import estimate
    rules = get_provider_class(provider).instance_rules()
    job = job_from_dict({**BASE, "max_runtime": "8h", "resources": {"accelerator": "A100", "gpus_per_node": 8},
                         "providers": {**BASE["providers"], provider: {**BASE["providers"].get(provider, {}),
                                                                       "region": "us-east-1"}}})
    catalog.load.cache_clear()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if with_prices:
            estimate(job, provider)  # resolves the instance (choose) and prices it
        else:
            choose(job, rules, None)
    return (time.perf_counter() - start) * 1000


def render_ms(path: Path, provider: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cloudtrain", "render", "-p", provider, str(path), "-o", "json"],
                   check=True, capture_output=True, cwd=str(path.parent))
    return (time.perf_counter() - start) * 1000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for provider, (option, named) in PROVIDERS.items():
            jobs = {}
            for label, resources, opts in (
                    ("accelerator", {"accelerator": "A100", "gpus_per_node": 8}, {}),
                    ("named", {"gpus_per_node": 8}, {option: named}),
                    ("no-gpu", {}, {})):
                data = json.loads(json.dumps(BASE))
                data["resources"] = resources
                data["providers"].setdefault(provider, {}).update(opts)
                path = Path(tmp) / f"{provider}-{label}.yaml"
                path.write_text(json.dumps(data))
                jobs[label] = path
            times = {label: [] for label in jobs}
            for _ in range(args.rounds):  # interleaved: the machine's load hits every variant alike
                for label, path in jobs.items():
                    times[label].append(render_ms(path, provider))
            med = {label: statistics.median(v) for label, v in times.items()}
            cold = statistics.median(in_process(provider) for _ in range(20))
            priced = statistics.median(in_process(provider, with_prices=True) for _ in range(20))
            rows.append({"provider": provider, "resolve_cold_ms": round(cold, 2),
                         "lookup_with_prices_cold_ms": round(priced, 2),
                         "render_accelerator_ms": round(med["accelerator"], 1),
                         "render_named_ms": round(med["named"], 1), "render_no_gpu_ms": round(med["no-gpu"], 1),
                         "added_vs_no_gpu_ms": round(med["accelerator"] - med["no-gpu"], 1),
                         "ratio_vs_no_gpu": round(med["accelerator"] / med["no-gpu"], 3)})
    print(json.dumps(rows, indent=2))
    worst = max(r["resolve_cold_ms"] for r in rows)
    print(f"resolution (catalog read + choice, cold, in process): worst {worst:.2f} ms; goal < 5 ms: "
          f"{'PASS' if worst < 5 else 'MISS'}", file=sys.stderr)
    worst = max(r["lookup_with_prices_cold_ms"] for r in rows)
    print(f"catalog lookup with prices (read + choice + estimate, cold, in process): worst {worst:.2f} ms; "
          f"goal < 5 ms: {'PASS' if worst < 5 else 'MISS'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.path[:0] = [str(REPO / "core"), str(REPO / "plugins")]
    os.environ.setdefault("PYTHONPATH", os.pathsep.join([str(REPO / "core"), str(REPO / "plugins")]))
    sys.exit(main())
