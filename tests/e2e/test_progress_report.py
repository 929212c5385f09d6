"""Progress from the job itself (issue 43): the digits example reports after every epoch, and
``status`` of a real local run shows where it is, while it runs and once it has ended."""
import json
import re

import pytest

from cloudtrain import attach

from conftest import EXAMPLES, run_cli, write_job
from helpers import assert_nothing_left, run_dir, wait_for

pytestmark = pytest.mark.e2e


def digits_job(tmp_path, epochs=4, sleep=1.5):
    return write_job(tmp_path, f"""
        name: digits-progress
        code: {EXAMPLES / "digits-ddp"}
        command: python train.py --epochs {epochs} --sleep-per-epoch {sleep}
        distribution: {{type: ddp, nodes: 1, procs_per_node: 2}}
        env: {{OMP_NUM_THREADS: "1"}}
    """)


def progress_of(handle):
    return json.loads(run_cli("status", handle, "-o", "json", check=0).stdout).get("progress")


def test_status_shows_the_digits_jobs_progress_while_it_runs_and_at_its_end(tmp_path, home):
    handle = run_cli("submit", digits_job(tmp_path), "--detach", check=0).stdout.strip()
    seen = []
    wait_for(lambda: (seen.append(progress_of(handle)) or (seen[-1] or {}).get("step") is not None), timeout=240)
    running = seen[-1]
    assert running["total_steps"] and 0 < running["step"] <= running["total_steps"]
    assert running["source"] in ("report", "plain") and running["metrics"]["loss"] > 0
    # list: PROGRESS and ETA of the running job, in the table and in -o json
    row = next(r for r in json.loads(run_cli("list", "-o", "json", check=0).stdout) if r["handle"] == handle)
    assert row["progress"]["total_steps"] == running["total_steps"] and row["progress"]["step"] >= running["step"]
    table = run_cli("list", check=0).stdout.splitlines()
    assert table[0].split()[5:8] == ["DURATION", "PROGRESS", "ETA"]
    assert re.search(r"\b\d+/%d \(\d+%%\)" % running["total_steps"], next(x for x in table if handle in x))
    # wait, not on a terminal: plain progress lines, the last one at the end
    waited = run_cli("wait", handle, timeout=300)
    assert waited.returncode == 0
    shown = [x for x in waited.stderr.splitlines() if x.startswith(f"{handle}  step ")]
    assert shown and "\r" not in waited.stderr and "ETA" in shown[-1], waited.stderr
    status = json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)
    final = status["progress"]
    assert status["state"] == "SUCCEEDED"
    # the report (stderr) and the epoch line (stdout) reach the log in either order: both say so
    assert (final["step"], final["epoch"], final["total_epochs"]) == (final["total_steps"], 4, 4)
    assert 0 < final["metrics"]["loss"] < running["metrics"]["loss"] + 1 and final["metrics"]["samples_per_s"] > 0
    assert final["eta"] == 0.0
    found = attach(handle).progress()  # the Python API reads the same
    assert (found.step, found.total_steps, found.metrics["loss"]) == \
        (final["step"], final["total_steps"], final["metrics"]["loss"])
    text = run_cli("status", handle, check=0).stdout
    assert re.search(r"^step (\d+)/\1 · epoch 4/4 · loss [0-9.]+ · train_acc [0-9.]+ · [0-9.]+ samples/s · ETA 0 s$",
                     text, re.M), text
    log = (run_dir(home, handle) / "job.log").read_text()
    reports = [json.loads(text.split("CLOUDTRAIN_PROGRESS ", 1)[1]) for text in log.splitlines()
               if text.startswith("[node0/rank0] CLOUDTRAIN_PROGRESS {")]
    assert reports and reports[-1]["step"] == final["step"] and reports[-1]["total_epochs"] == 4
    assert "[node0/rank1] CLOUDTRAIN_PROGRESS" not in log  # the other rank's calls write nothing
    # the dashboard draws its loss curve (issue 43 item 3): a point for each of rank 0's lines that
    # told a loss (its reports and its `epoch N/M loss ...` lines), one attempt
    from cloudtrain.runtime.progress import parse_line
    from uicheck import chart_points
    told = [found for found in map(parse_line, log.splitlines()) if found and "loss" in found[3]]
    assert chart_points(handle, "loss") == {(handle, 0): len(told)}
    assert_nothing_left(run_dir(home, handle))
