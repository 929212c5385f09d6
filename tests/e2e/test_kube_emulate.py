"""The digits example trains for real under an emulated Kubeflow / Volcano pod environment:
the operator's variables only (PyTorchJob's MASTER_ADDR/RANK/PET_*, MPIJob's launcher role,
Volcano's VC_*, a TrainJob's PET_* and completion index), and cloudtrain launch auto-detects them."""
import re

import pytest

from conftest import EXAMPLES, run_cli
from helpers import handle_from, metrics

pytestmark = pytest.mark.e2e


def train(home, example, platform, *extra):
    proc = run_cli("submit", EXAMPLES / example / "job.yaml", "--emulate", platform,
                   "--set", "command=python train.py --epochs 3", *extra, timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    return proc, handle_from(proc.stderr)


@pytest.mark.parametrize("platform", ["kubeflow", "volcano", "kubeflow-trainer"])
def test_digits_ddp_under_an_emulated_pod_environment(home, platform):
    proc, handle = train(home, "digits-ddp", platform)
    assert metrics(home, handle)["world_size"] == 4
    ranks = set(re.findall(r"^\[node(\d)/rank(\d)\] rank \d/4", proc.stdout, re.M))
    assert ranks == {("0", "0"), ("0", "1"), ("1", "2"), ("1", "3")}


def test_mpi_under_an_emulated_mpijob(home):
    proc, handle = train(home, "mpi-allreduce", "kubeflow")
    assert metrics(home, handle)["world_size"] == 4
