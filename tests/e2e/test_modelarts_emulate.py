"""ModelArts Lite's node environment, emulated here, with ranktable routing's renumbering
(RANK_AFTER_ACC != VC_TASK_INDEX): the digits example really trains, and every pod runs the
ranks that routing gave it, not the ones of its Volcano index."""
import re

import pytest

from conftest import EXAMPLES, run_cli
from helpers import assert_nothing_left, handle_from, metrics, run_dir

pytestmark = pytest.mark.e2e

# pod (VC_TASK_INDEX) i -> RANK_AFTER_ACC; the master is pod 1 (MA_MASTER_INDEX=1)
RENUMBERED = [2, 0, 1]


def test_digits_ddp_trains_under_modelarts_lite_with_renumbered_ranks(home):
    proc = run_cli("submit", "-p", "local", "--emulate", "modelarts-lite", EXAMPLES / "digits-ddp" / "job.yaml",
                   "--set", "distribution.nodes=3", "--set", "distribution.procs_per_node=1",
                   "--set", f"providers.modelarts-lite.emulate_rank_after_acc={RENUMBERED}", timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    handle = handle_from(proc.stderr)
    assert_nothing_left(run_dir(home, handle))
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    assert metrics(home, handle)["world_size"] == 3
    # "[node<pod>/...] rank <r>/3 local_rank 0 on node <n>": the script's own view of its place
    seen = {int(pod): (int(rank), int(node)) for pod, rank, node in
            re.findall(r"^\[node(\d)[^\]]*\] rank (\d)/3 local_rank 0 on node (\d)", proc.stdout, re.M)}
    assert seen == {pod: (new, new) for pod, new in enumerate(RENUMBERED)}
    # rank 0 (pod 1, the routed master) is the one that evaluated and wrote the outputs
    assert re.search(r"^\[node1[^\]]*\] test_accuracy", proc.stdout, re.M)
