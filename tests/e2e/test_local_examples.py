"""Every distribution type really runs locally, from the examples, through the CLI."""
import json
import re

import pytest

from conftest import EXAMPLES, run_cli
from helpers import assert_nothing_left, handle_from, metrics, run_dir

pytestmark = pytest.mark.e2e


def submit(example, home, *extra):
    proc = run_cli("submit", EXAMPLES / example / "job.yaml", *extra, timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    handle = handle_from(proc.stderr)
    assert_nothing_left(run_dir(home, handle))
    return proc, handle


def test_digits_ddp_two_nodes_by_two_ranks(home):
    proc, handle = submit("digits-ddp", home)
    accuracy = float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1))
    assert accuracy >= 0.9
    assert metrics(home, handle)["world_size"] == 4
    assert (run_dir(home, handle) / "output" / "model.pt").stat().st_size > 0
    # node/rank-prefixed lines, from both nodes, and per-rank log files
    ranks = set(re.findall(r"^\[node(\d)/rank(\d)\] rank \d/4", proc.stdout, re.M))
    assert ranks == {("0", "0"), ("0", "1"), ("1", "2"), ("1", "3")}
    assert (run_dir(home, handle) / "node-1" / "rank-3.log").read_text()
    assert "SUCCEEDED" in proc.stderr


def test_mpi_allreduce_across_two_nodes(home):
    proc, handle = submit("mpi-allreduce", home)
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    assert metrics(home, handle)["world_size"] == 4
    assert {m for m in re.findall(r"^\[node\d/rank(\d)\]", proc.stdout, re.M)} == {"0", "1", "2", "3"}


def test_ray_two_nodes_form_one_cluster(home):
    proc, handle = submit("ray-counter", home)
    assert "counter results: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]" in proc.stdout
    assert re.search(r"ray nodes: 2\b", proc.stdout)
    assert "task on Rank:1 ran on node 1" in proc.stdout


def test_ps_worker_parameter_server_training(home):
    proc, handle = submit("ps-worker", home)
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    roles = json.loads(json.dumps(metrics(home, handle)))
    assert roles


@pytest.mark.timeout(900)  # the first run on a machine compiles DeepSpeed's CPU op (~100 s on 2 cores)
def test_deepspeed_two_nodes(home):
    proc, handle = submit("deepspeed-digits", home)
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    assert metrics(home, handle)["world_size"] == 2
    assert "rank 1/2 local_rank 0 on node 1" in proc.stdout
