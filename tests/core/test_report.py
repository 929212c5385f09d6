"""``cloudtrain.launch.report``: the line a training script's progress becomes (issue 43), on a
node where only the shipped launcher bundle is on the path."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from cloudtrain.launch.bundle import write_bundle
from cloudtrain.launch.report import PREFIX, line, secret_like

SECRET = "987654321"  # a value only the secret-named metrics carry


def test_line_is_the_prefix_and_compact_versioned_json():
    text = line(1764316800.25, (1200, 5000, 1.5, None), {"loss": 0.31, "samples_per_s": 412})
    assert text.startswith(PREFIX) and "\n" not in text and " " not in text[len(PREFIX):]
    assert json.loads(text[len(PREFIX):]) == {"v": 1, "t": 1764316800.25, "step": 1200, "total_steps": 5000,
                                              "epoch": 1.5, "metrics": {"loss": 0.31, "samples_per_s": 412}}


def test_only_numbers_under_plain_names_are_written():
    hostile = {"loss": float("nan"), "acc": True, "note": "x" * 50, "bad name": 1, "a\nb": 2, "x" * 65: 3,
               "obj": object(), "lr": 5e-05, "tokens_per_s": 3.5}
    record = json.loads(line(0.0, (None, None, None, None), hostile)[len(PREFIX):])
    assert record["metrics"] == {"loss": None, "lr": 5e-05, "tokens_per_s": 3.5}


def test_secret_named_metrics_are_dropped():
    names = ["aws_secret_access_key", "token", "password", "authToken", "api_key", "AZURE_CLIENT_SECRET",
             "db.passwd", "hf-token", "private_key", "session_id"]
    assert all(secret_like(n) for n in names)
    assert not any(secret_like(n) for n in ["loss", "tokens_per_s", "num_tokens", "grad_norm", "keypoint_loss"])
    text = line(0.0, (1, 2, None, None), {n: int(SECRET) for n in names} | {"loss": 0.5})
    assert SECRET not in text and json.loads(text[len(PREFIX):])["metrics"] == {"loss": 0.5}


SCRIPT = textwrap.dedent("""
    import sys
    from cloudtrain.launch import report, flush_report
    for i in range(1, 20001):
        report(step=i, total_steps=20000, loss=1.0 / i, aws_secret_access_key=%s, token=%s)
    flush_report()
    print("stdout stays the script's own")
""" % (SECRET, SECRET))


def run_on_node(tmp_path, rank: str):
    """The script on a "node": a bare interpreter with only the shipped bundle on its path."""
    bundle = write_bundle(tmp_path / "bundle")
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(bundle), "RANK": rank}
    # -S: no site-packages, so the installed cloudtrain is out of reach; only the bundle is there
    return subprocess.run([sys.executable, "-S", "-c", SCRIPT], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_rank_zero_writes_the_newest_report_on_stderr_from_the_shipped_bundle(tmp_path):
    assert (write_bundle(tmp_path / "b") / "cloudtrain" / "launch" / "report.py").is_file()
    proc = run_on_node(tmp_path, "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "stdout stays the script's own\n"
    reports = [json.loads(text[len(PREFIX):]) for text in proc.stderr.splitlines() if text.startswith(PREFIX)]
    assert len(reports) <= 3  # a line a second at most: 20,000 calls do not flood the log
    assert reports[-1]["step"] == 20000 and reports[-1]["metrics"] == {"loss": 1.0 / 20000}
    assert SECRET not in proc.stderr + proc.stdout


def test_other_ranks_write_nothing(tmp_path):
    proc = run_on_node(tmp_path, "1")
    assert proc.returncode == 0, proc.stderr
    assert PREFIX not in proc.stderr
