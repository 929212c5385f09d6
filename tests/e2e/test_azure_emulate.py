"""The digits example really trains under Azure ML's emulated node environment (seed 002): every
node gets only what Azure ML's PyTorch distribution injects with one process per node
(MASTER_ADDR, MASTER_PORT, WORLD_SIZE = processes = nodes, NODE_RANK, RANK, LOCAL_RANK), and
cloudtrain launch resolves it through the azure detector and starts torchrun for the node's two
processes, so the script sees PyTorch's RANK/WORLD_SIZE over 2 nodes x 2 processes."""
import json
import re

import pytest

from conftest import EXAMPLES, run_cli
from helpers import assert_nothing_left, handle_from, metrics, run_dir

pytestmark = pytest.mark.e2e


def test_digits_ddp_trains_under_azure(home):
    proc = run_cli("submit", "-p", "local", "--emulate", "azure", EXAMPLES / "digits-ddp" / "job.yaml", timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    handle = handle_from(proc.stderr)
    assert_nothing_left(run_dir(home, handle))
    envs = [n["env"] for n in json.loads((run_dir(home, handle) / "plan.json").read_text())["nodes"]]
    # what the nodes got: Azure's PyTorch variables, and no generic CLOUDTRAIN_NUM_NODES to fall back on
    assert [(e["WORLD_SIZE"], e["NODE_RANK"], e["RANK"], e["LOCAL_RANK"]) for e in envs] == \
        [("2", "0", "0", "0"), ("2", "1", "1", "0")]
    assert all("AZUREML_RUN_ID" in e and "CLOUDTRAIN_NUM_NODES" not in e for e in envs)
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"]
    assert envs[0]["CLOUDTRAIN_DETECTORS"] == "azure=cloudtrain_azure.detect:detect"
    # what the script saw: PyTorch's meaning, 2 nodes x 2 processes
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    assert metrics(home, handle)["world_size"] == 4
    ranks = set(re.findall(r"^\[node(\d)/rank(\d)\] rank \d/4", proc.stdout, re.M))
    assert ranks == {("0", "0"), ("0", "1"), ("1", "2"), ("1", "3")}
