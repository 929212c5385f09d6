"""The controller through the command line, against TI-ONE's double: ``submit --detach`` of a job
with ``max_restarts`` starts a detached controller; ``status -o json`` has the attempts under the
handle submit printed, ``controller status`` says what it follows, ``list`` has one row for the
job, ``cancel`` stops the plan and the task, and the controller then ends by itself."""
import json
import os
import signal
import time

from cloudtrain.runtime import procs
from conftest import run_cli, write_job
from test_controller_tione import PricedTione
from doubles.tione_double import SECRET_ID, SECRET_KEY


def test_submit_status_list_cancel_of_a_followed_job(tmp_path, home):
    with PricedTione() as fake:
        env = {"TENCENTCLOUD_SECRET_ID": SECRET_ID, "TENCENTCLOUD_SECRET_KEY": SECRET_KEY,
               "CLOUDTRAIN_TIONE_ENDPOINT": fake.url, "TENCENTCLOUD_REGION": "ap-shanghai",
               "CLOUDTRAIN_CONTROLLER_POLL": "0.2"}
        (tmp_path / "code").mkdir()
        (tmp_path / "code" / "train.py").write_text("print('hi')\n")
        job = write_job(tmp_path, """
            name: followed
            code: code
            command: python train.py
            image: img:1
            distribution: {type: ddp, nodes: 2}
            max_restarts: 2
            providers: {tione: {region: ap-shanghai, instance_type: TI.S.LARGE.POST,
                                code_source: "cos://train-1250000000/code/lc/"}}
        """)
        proc = run_cli("submit", "-p", "tione", job, "--detach", env=env, check=0)
        handle = proc.stdout.strip()
        task = fake.tasks[handle.split("/")[-1]]
        task.update(script=["RUNNING"], step=0)  # it runs until cancelled
        pid = None
        try:
            shown = json.loads(run_cli("controller", "status", "-o", "json", env=env, check=0).stdout)
            assert shown["controller"] is not None
            pid = shown["controller"]["pid"]
            assert [p["handle"] for p in shown["following"]] == [handle]
            status = json.loads(run_cli("status", handle, "-o", "json", env=env, check=0).stdout)
            assert status["handle"] == handle
            assert [(a["attempt"], a["provider"], a["handle"]) for a in status["attempts"]] == [(0, "tione", handle)]
            listed = json.loads(run_cli("list", "-o", "json", env=env, check=0).stdout)
            assert [e["handle"] for e in listed] == [handle]
            run_cli("cancel", handle, env=env, check=0)
            assert "StopTrainingTask" in fake.actions()
            status = json.loads(run_cli("status", handle, "-o", "json", env=env, check=0).stdout)
            assert status["state"] == "CANCELLED" and status["raw_state"] == "CANCELLED"
            assert status["attempts"][0]["reason"] == "cancelled"
            deadline = time.monotonic() + 60
            while procs.start_time(pid) is not None and time.monotonic() < deadline:
                time.sleep(0.1)  # nothing left to follow: it ends by itself
            assert procs.start_time(pid) is None
        finally:
            if pid is not None and procs.start_time(pid) is not None:
                os.kill(pid, signal.SIGKILL)
        assert fake.actions().count("CreateTrainingTask") == 1
