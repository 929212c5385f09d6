"""ec2 (issue 41 item 7, issue 40 item 5): a node that reaches max_runtime stops billing.  At
executionTimeout the SSM agent SIGKILLs the node script's process group (amazon-ssm-agent
agent/executers/executers_unix.go killProcess), so its EXIT trap never schedules a shutdown; the
script's first step arms one for max_runtime plus a grace period, which the kill cannot undo, and
RunInstances' InstanceInitiatedShutdownBehavior: terminate makes that shutdown end the instance.

The rendered script runs for real under bash, with stand-ins on PATH for the AMI's python3 and for
systemd's shutdown(8)/systemd-run(1).  The shutdown stand-in keeps what systemd-logind keeps: one
pending shutdown, in a file outside the script's process group, replaced by a later schedule and
removed by ``shutdown -c`` (shutdown(8): "-c Cancel a pending shutdown"; systemctl(1) --when=)."""
import json
import os
import shutil
import subprocess

import pytest

from doubles.aws_double import validate_request
from cloudtrain_aws.render import BACKSTOP_GRACE_MINUTES
from test_aws_ec2 import artifacts, filled, job
from test_aws_ec2_node_end import FAKE_PYTHON, NODE0, install

BASH = shutil.which("bash")
# systemd's shutdown: "+m" (or "now") schedules, replacing the pending one; -c cancels it; each call logged
FAKE_SHUTDOWN = """#!/bin/sh
echo "shutdown $*" >>"$CALLS"
case "$*" in
  *-c*) rm -f "$PENDING" ;;
  *) for a in "$@"; do case "$a" in +*|now) echo "$a" >"$PENDING" ;; esac; done ;;
esac
"""
FAKE_SYSTEMD_RUN = '#!/bin/sh\necho "systemd-run $*" >>"$CALLS"\n'


def rendered(tmp_path=None, **options):
    if tmp_path is not None:
        options["workdir"] = str(tmp_path / "work")
    arts = artifacts(job(options=options))
    run = next(a.content for a in arts if a.kind == "ec2/RunInstances")
    [script] = [a.content["script"] for a in arts if a.name == "nodes"]
    return run, script


def run_node(tmp_path, script, fail):
    """The node's script as SSM runs it: leader of its own process group, root's PATH with the stand-ins."""
    bin_dir = tmp_path / "bin"
    install(bin_dir, "python3", FAKE_PYTHON)
    install(bin_dir, "shutdown", FAKE_SHUTDOWN)
    install(bin_dir, "systemd-run", FAKE_SYSTEMD_RUN)
    calls, pending = tmp_path / "calls", tmp_path / "pending"
    calls.write_text("")
    pending.unlink(missing_ok=True)
    shutil.rmtree(tmp_path / "work", ignore_errors=True)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "AWS_SSM_INSTANCE_ID": NODE0, "CALLS": str(calls),
           "PENDING": str(pending), "FAIL": fail}
    text = filled(script).replace("/etc/hosts", str(tmp_path / "hosts"))
    proc = subprocess.run([BASH], input=text, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          start_new_session=True)
    return proc, calls.read_text().splitlines(), pending.read_text().strip() if pending.exists() else None


def test_run_instances_makes_an_instance_initiated_shutdown_terminate_the_instance():
    """botocore's ec2 model: RunInstancesRequest.InstanceInitiatedShutdownBehavior, ShutdownBehavior
    enum stop|terminate.  A stopped instance still bills its volumes; a terminated one bills nothing."""
    run, script = rendered()
    assert run["InstanceInitiatedShutdownBehavior"] == "terminate"
    validate_request("ec2", "RunInstances", json.loads(filled(json.dumps(run))))
    assert "STEP='arming the shutdown backstop'" in script
    # terminate_when_done: false keeps the instance up for the user, backstop included (cancel ends it)
    run, script = rendered(terminate_when_done=False)
    validate_request("ec2", "RunInstances", json.loads(filled(json.dumps(run))))
    assert "InstanceInitiatedShutdownBehavior" not in run and "shutdown -h" not in script


@pytest.mark.parametrize("seconds,minutes", [(60, 1), (61, 2), (3600, 60), (172800, 2880)])
def test_the_backstop_is_armed_for_max_runtime_plus_the_grace_before_the_users_command(tmp_path, seconds, minutes):
    _, script = rendered(tmp_path, max_runtime_seconds=seconds)
    proc, calls, pending = run_node(tmp_path, script, "none")
    assert proc.returncode == 0, proc.stderr
    backstop = f"shutdown -h +{minutes + BACKSTOP_GRACE_MINUTES} cloudtrain: max_runtime plus " \
               f"{BACKSTOP_GRACE_MINUTES} minutes reached"
    # first, before the code is fetched and the launcher (the user's command) runs; the end's shutdown
    # (a minute) then replaces it, as logind keeps one pending shutdown
    assert calls == [backstop, "fetch", "code", "launch", "shutdown -h +1 cloudtrain: the job ended"]
    assert pending == "+1"


def test_ssm_killing_the_scripts_process_group_leaves_the_backstop_armed(tmp_path):
    """The SSM agent's kill at executionTimeout: SIGKILL to the group whose leader the script is
    (executers_unix.go prepareProcess Setpgid, killProcess syscall.Kill(-pid, SIGKILL)).  Nothing of
    the trap runs, but the shutdown scheduled at the start is still pending: the instance goes down
    max_runtime plus the grace period after the script started, and terminates."""
    _, script = rendered(tmp_path, max_runtime_seconds=7200)
    proc, calls, pending = run_node(tmp_path, script, "kill")
    assert proc.returncode == -9
    assert calls[1:] == ["fetch", "code", "launch"]  # killed in the launcher: node_end never ran
    assert calls[0].startswith(f"shutdown -h +{120 + BACKSTOP_GRACE_MINUTES} ")
    assert pending == f"+{120 + BACKSTOP_GRACE_MINUTES}"


def test_a_node_that_cannot_arm_the_backstop_runs_nothing_of_the_job(tmp_path):
    _, script = rendered(tmp_path)
    install(tmp_path / "bin", "shutdown", "#!/bin/sh\necho \"shutdown $*\" >>\"$CALLS\"\nexit 1\n")
    bin_dir = tmp_path / "bin"
    install(bin_dir, "python3", FAKE_PYTHON)
    calls = tmp_path / "calls"
    calls.write_text("")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "AWS_SSM_INSTANCE_ID": NODE0, "CALLS": str(calls),
           "FAIL": "none"}
    text = filled(script).replace("/etc/hosts", str(tmp_path / "hosts"))
    proc = subprocess.run([BASH], input=text, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "failed while arming the shutdown backstop (exit 1)" in proc.stderr
    assert [c.split(" ")[0] for c in calls.read_text().splitlines()] == ["shutdown", "shutdown"]  # arm, end
