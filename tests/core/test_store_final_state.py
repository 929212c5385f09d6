"""An ended local job's status shows its final raw state, not the one it had while running."""
from __future__ import annotations

import json
import re

from conftest import run_cli, write_job


def test_status_json_of_an_ended_local_job_shows_its_final_raw_state(tmp_path, home):
    (tmp_path / "t.py").write_text("import sys; sys.exit(int(sys.argv[1]))\n")
    for code, final in ((0, "SUCCEEDED"), (3, "FAILED")):
        job = write_job(tmp_path, f"name: final-{code}\ncode: .\ncommand: python t.py {code}\n"
                                  "distribution: {type: none, nodes: 1}\n")
        proc = run_cli("submit", "-p", "local", job, cwd=tmp_path, timeout=120)
        handle = re.search(r"local://\S+", proc.stderr + proc.stdout).group(0)
        status = json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)
        assert status["state"] == final and status["raw_state"] == final, status
