"""A node lost mid-run, really run locally: node 1's whole process group (its launcher, torchrun and
its rank) is SIGKILLed after epoch 3 of a 2 x 1 digits job with max_restarts 1.  The local
supervisor (the platform here: it restarts by itself, the controller only watches) restarts
every node with CLOUDTRAIN_RESTART_COUNT=1, the job resumes from the checkpoint and finishes, and
the reason reads as a ``node-failure`` (cloudtrain.orchestrate.failures) - what restart_on's
default covers on the providers where the controller restarts."""
import json
import os
import re
import signal

import pytest

from cloudtrain.orchestrate import failures
from cloudtrain.runtime import procs
from cloudtrain.runtime.store import Store
from conftest import EXAMPLES, run_cli, write_job
from helpers import assert_nothing_left, run_dir, wait_for

pytestmark = pytest.mark.e2e


def test_a_nodes_process_group_killed_restarts_the_job_from_its_checkpoint(tmp_path, home):
    checkpoints = tmp_path / "ckpt"
    job = write_job(tmp_path / "job", f"""
        name: digits-node-lost
        code: {EXAMPLES / "digits-ddp"}
        command: python train.py --epochs 8 --sleep-per-epoch 1
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        env: {{OMP_NUM_THREADS: "1"}}
        storage: {{checkpoint: {checkpoints}}}
        max_restarts: 1
    """)
    handle = run_cli("submit", job, "--detach", check=0).stdout.strip()
    job_id = handle.split("://", 1)[1]
    log = run_dir(home, handle) / "job.log"
    wait_for(lambda: log.exists() and "epoch 3/8" in log.read_text(), timeout=400)
    node = next(n for n in Store().get_nodes(job_id) if n["node"] == 1)
    assert procs.same(node["pid"], node["pid_start"]) and os.getpgid(node["pid"]) == node["pid"]
    os.killpg(node["pid"], signal.SIGKILL)  # the node is gone: launcher, torchrun and rank at once
    final = json.loads(run_cli("wait", handle, "-o", "json", timeout=900).stdout)
    text = log.read_text()
    assert final["state"] == "SUCCEEDED", text[-3000:]
    reason = final["restarts"][0]["reason"]
    assert reason.startswith("node 1 was killed by signal 9"), reason
    assert failures.classify("local", reason)[0] == failures.NODE_FAILURE
    second = text.split("restarting every node", 1)[1]
    resumed = re.search(r"resumed from epoch (\d+) \(restart 1\)", second)
    assert resumed and int(resumed.group(1)) >= 3, second[:3000]
    assert "epoch 1/8" not in second and "epoch 8/8" in second
    assert_nothing_left(run_dir(home, handle))
