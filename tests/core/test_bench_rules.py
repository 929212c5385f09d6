"""The benchmark suite's rules (bench/): a row compared with a failed or missing anchor (TorchX,
bare torchrun, boto3 alone) is a FAIL with the reason, never a ratio, PASS or MISS; a TorchX
that does not run is a failed anchor; what the suite installs is what cloudtrain's extras pin."""
from __future__ import annotations

import importlib
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch):
    """bench/'s modules, imported by path as bench/run.py imports them."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    for name in ("benchlib", "bench_cli", "run"):
        sys.modules.pop(name, None)
    mods = {name: importlib.import_module(name) for name in ("benchlib", "bench_cli", "run")}
    yield mods
    for name in mods:
        sys.modules.pop(name, None)


def stats(bench, *samples):
    return bench["benchlib"].Stats(list(samples))


def test_a_failed_anchor_run_fails_the_row_even_when_other_runs_gave_a_ratio(bench):
    row = bench["benchlib"].compared("launch-overhead", "wall", ["ours"], stats(bench, 1.0, 1.1), ["torchrun"],
                                     stats(bench, 2.0), "≤ 1.05 × torchrun", lambda r: r <= 1.05,
                                     alt_failures=["exit codes [1]"], alt_name="torchrun 1x2")
    assert (row.ratio, row.passed, row.result) == (None, False, "**FAIL**")
    assert "torchrun 1x2 failed: exit codes [1]" in row.note


def test_a_missing_anchor_fails_the_row(bench):
    row = bench["benchlib"].compared("sagemaker-submit", "latency", ["ours"], stats(bench, 1.0), ["boto3"], None,
                                     alt_name="boto3 alone")
    assert (row.ratio, row.result) == (None, "**FAIL**")
    assert "boto3 alone: no measurement" in row.failure


def test_a_measured_comparison_is_a_ratio_judged_by_its_goal(bench):
    lib = bench["benchlib"]
    row = lib.compared("t", "w", ["a"], stats(bench, 1.0), ["b"], stats(bench, 2.0), "≤ 0.6 ×", lambda r: r <= 0.6)
    assert (row.ratio, row.result) == (0.5, "**PASS**")
    row = lib.compared("t", "w", ["a"], stats(bench, 1.5), ["b"], stats(bench, 2.0), "≤ 0.6 ×", lambda r: r <= 0.6)
    assert (row.ratio, row.result) == (0.75, "**MISS**")


def test_a_row_with_a_failure_never_shows_a_ratio_or_a_pass(bench):
    row = bench["benchlib"].Row("x", "y", [], None, ratio=0.5, passed=True, failure="torchx is not installed")
    assert (row.ratio, row.passed, row.result) == (None, False, "**FAIL**")
    line = bench["run"].table([row]).splitlines()[2]
    assert line.endswith("| — | — | **FAIL** |")
    assert bench["run"].summarize([row]) == "**0 PASS, 0 MISS, 1 FAIL** (0 informational rows)."


def test_cold_start_rows_against_a_broken_torchx_fail(bench):
    cli = bench["bench_cli"]
    subjects = {"cloudtrain:local": (["cloudtrain", "render"], REPO),
                "torchx:kubernetes": (["torchx", "run"], REPO), "torchx:local_cwd": (["torchx", "run"], REPO)}
    samples = {"cloudtrain:local": [0.2, 0.3], "torchx:local_cwd": [1.0]}
    why = "ModuleNotFoundError: No module named 'importlib_metadata'"
    rows = cli.cold_start_rows(["local"], subjects, samples, {"torchx:kubernetes": why})
    assert [(r.result, r.ratio) for r in rows] == [("**FAIL**", None), ("**PASS**", 0.25)]
    assert why in rows[0].note


def test_a_torchx_that_does_not_run_is_a_failed_anchor(bench, tmp_path, monkeypatch):
    lib = bench["benchlib"]
    broken = tmp_path / "torchx"
    broken.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'importlib_metadata'\" >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("BENCH_TORCHX", str(broken))
    torchx = lib.find_torchx(lambda _: None)
    assert not torchx
    assert torchx.failure == "`torchx --help` exits 1: ModuleNotFoundError: No module named 'importlib_metadata'"


def test_what_the_suite_installs_is_what_cloudtrains_extras_pin(bench):
    """Each requirement the suite installs comes from pyproject.toml's extra that names it."""
    lib = bench["benchlib"]
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    requires = [f'{spec}; extra == "{extra}"' for extra, specs in extras.items() for spec in specs]
    for module, extra, default in lib.NEEDS:
        spec = lib.declared(requires, extra, default)
        assert spec in extras[extra], (module, extra, spec)
    assert lib.declared(requires, "test", "moto") == "moto[server]>=5"
    assert lib.declared(requires, "examples", "torch") == "torch==2.13.0"


def test_cold_start_against_the_import_floor_is_a_ratio_of_medians_and_a_failed_floor_fails(bench):
    floor = importlib.import_module("bench_floor")
    argvs = floor.subjects(["local", "kubeflow"])
    samples = {"floor": [0.07, 0.08, 0.07], "help": [0.09, 0.08, 0.08], "render:local": [0.1, 0.1, 0.2],
               "validate:local": [0.2, 0.21, 0.2], "render:kubeflow": [0.1], "validate:kubeflow": [0.1],
               "model-floor": [0.1]}
    rows = floor.floor_rows(["local", "kubeflow"], argvs, samples, {})
    help_, render, validate, *per_provider_and_informational = rows
    assert [r.what for r in rows[1:5]] == [f"`{c} -p {p}` of the digits job: cold start vs the import floor"
                                           for p in ("local", "kubeflow") for c in ("render", "validate")]
    assert (round(help_.ratio, 3), help_.result) == (1.143, "**PASS**")  # 0.08 / 0.07, goal 1.2
    informational = per_provider_and_informational[2:]
    assert [(r.ratio, r.passed) for r in informational] == [(1.0, None), (2.0, None)]
    assert (round(render.ratio, 3), render.result) == (1.429, "**PASS**")  # 0.1 / 0.07
    assert (round(validate.ratio, 3), validate.result) == (2.857, "**MISS**")
    samples = {"help": [0.1], "render:local": [0.1], "validate:local": [0.1]}
    rows = floor.floor_rows(["local"], floor.subjects(["local"]), samples, {"floor": ["exit 1"]})
    assert [(r.ratio, r.result) for r in rows[:3]] == [(None, "**FAIL**")] * 3
    assert "the import floor failed: exit 1" in rows[0].note
