"""The examples really run under TI-ONE's emulated node environment (seed 000): every node gets
only TI-ONE's variables (DDP: WORLD_SIZE = nodes, RANK = node index; Ray: HEAD_ADDR/HEAD_PORT/
RANK), and cloudtrain launch resolves them through the tione detector."""
import json
import re

import pytest

from conftest import EXAMPLES, run_cli
from helpers import assert_nothing_left, handle_from, metrics, run_dir

pytestmark = pytest.mark.e2e


def submit(home, example):
    proc = run_cli("submit", "-p", "local", "--emulate", "tione", EXAMPLES / example / "job.yaml", timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    handle = handle_from(proc.stderr)
    assert_nothing_left(run_dir(home, handle))
    plan = json.loads((run_dir(home, handle) / "plan.json").read_text())
    return proc, handle, [n["env"] for n in plan["nodes"]]


def test_digits_ddp_trains_under_tione(home):
    proc, handle, envs = submit(home, "digits-ddp")
    # what the nodes got: TI-ONE's DDP table, with WORLD_SIZE and RANK counting nodes, and no
    # generic CLOUDTRAIN_NUM_NODES to fall back on
    assert [(e["WORLD_SIZE"], e["RANK"], e["INDEX"]) for e in envs] == [("2", "0", "0"), ("2", "1", "1")]
    assert all("CLOUDTRAIN_NUM_NODES" not in e and "NODE_LIST" in e for e in envs)
    assert envs[0]["CLOUDTRAIN_DETECTORS"] == "tione=cloudtrain_tione.detect:detect"
    # what the script saw: PyTorch's meaning, 2 nodes x 2 processes
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    assert metrics(home, handle)["world_size"] == 4
    ranks = set(re.findall(r"^\[node(\d)/rank(\d)\] rank \d/4", proc.stdout, re.M))
    assert ranks == {("0", "0"), ("0", "1"), ("1", "2"), ("1", "3")}


def test_ray_counter_runs_under_tione(home):
    proc, handle, envs = submit(home, "ray-counter")
    assert [(e["HEAD_ADDR"], e["RANK"]) for e in envs] == [("127.0.0.1", "0"), ("127.0.0.1", "1")]
    assert envs[0]["HEAD_PORT"] == envs[1]["HEAD_PORT"]
    assert "counter results: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]" in proc.stdout
    assert re.search(r"ray nodes: 2\b", proc.stdout)
    assert "task on Rank:1 ran on node 1" in proc.stdout
