"""``stall_timeout``, really run locally (issue 41's done-when): a 2 x 1 digits job whose rank 1 is
stuck after epoch 2 prints nothing for 20 s; each node's launcher writes every rank's Python
stack into the log (faulthandler), ends with ``stalled: no output for 20s``, the attempt counts
as a ``hang``, the job restarts and finishes from epoch >= 2 of its checkpoint."""
import json
import re
from pathlib import Path

import pytest

from cloudtrain.orchestrate import failures
from conftest import EXAMPLES, run_cli, write_job
from helpers import assert_nothing_left, run_dir

pytestmark = pytest.mark.e2e
HERE = Path(__file__).parent


def test_a_stuck_rank_is_a_hang_and_the_job_restarts_from_its_checkpoint(tmp_path, home):
    checkpoints = tmp_path / "ckpt"
    code = tmp_path / "code"
    code.mkdir()
    (code / "stuck_digits.py").write_text((HERE / "stuck_digits.py").read_text())
    job = write_job(tmp_path / "job", f"""
        name: digits-stall
        code: {code}
        command: python stuck_digits.py --epochs 5 --sleep-per-epoch 0.5
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        env: {{OMP_NUM_THREADS: "1", DIGITS_DIR: "{EXAMPLES / 'digits-ddp'}"}}
        storage: {{checkpoint: {checkpoints}}}
        stall_timeout: 20s
        max_restarts: 1
    """)
    proc = run_cli("submit", job, timeout=900)
    handle = [w for w in proc.stderr.split() if w.startswith("local://")][0]
    text = (run_dir(home, handle) / "job.log").read_text()
    assert proc.returncode == 0, text[-4000:]
    first, second = text.split("restarting every node", 1)
    assert "rank 1: stuck after epoch 2" in first
    assert "stalled: no output for 20s; every rank's Python stack follows" in first
    # faulthandler's dump of the stuck rank: its thread's stack, down to the wait it is stuck in
    assert re.search(r"(Current thread|Thread) 0x[0-9a-f]+", first) and "stuck_digits.py" in first
    resumed = re.search(r"resumed from epoch (\d+) \(restart 1\)", second)
    assert resumed and int(resumed.group(1)) >= 2, second[:3000]
    assert "epoch 1/5" not in second and "epoch 5/5" in second
    status = json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)
    assert status["state"] == "SUCCEEDED"
    reason = status["restarts"][0]["reason"]
    assert "stalled: no output for 20s" in reason
    assert failures.classify("local", reason)[0] == failures.HANG
    assert_nothing_left(run_dir(home, handle))
