"""ec2: the checkpoint sync, once stopped, leaves nothing running.  The rendered script runs for
real under sh, dash and bash, with a stand-in on PATH for the AWS CLI."""
import os
import shutil
import subprocess

import pytest

from cloudtrain_aws import ec2
from test_aws_ec2 import artifacts, job

SHELLS = [s for s in ("sh", "dash", "bash") if shutil.which(s)]


def install(bin_dir, name, text):
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(text)
    (bin_dir / name).chmod(0o755)


# `aws s3 sync --only-show-errors SRC DST`: nothing copied; each upload logged.  The first upload
# (the loop's) says it runs ($LOG.running) and waits up to 3 s for another upload to start; an
# upload that starts while another runs is logged as an overlap.
FAKE_AWS = """#!/bin/sh
[ "$1 $2" = "s3 sync" ] || exit 9
case "$5" in s3://*) ;; *) exit 0 ;; esac
[ ! -e "$LOG.running" ] || echo overlap >>"$LOG"
if mkdir "$LOG.first" 2>/dev/null; then
  echo "loop upload" >>"$LOG"; touch "$LOG.running"
  i=0; while [ ! -e "$LOG.second" ] && [ "$i" -lt 30 ]; do /bin/sleep 0.1; i=$((i + 1)); done
  rm -f "$LOG.running"; echo "loop upload ended" >>"$LOG"
else
  touch "$LOG.second"; echo "upload" >>"$LOG"
fi
"""


def checkpoint_lines(monkeypatch, tmp_path):
    """The script's checkpoint sync (the loop every second here), and how it ends after the launcher."""
    monkeypatch.setattr(ec2, "CHECKPOINT_SYNC_SECONDS", 1)
    [script] = [a.content["script"] for a in artifacts(job(storage={"checkpoint": "s3://team/ckpt/"}))
                if a.name == "nodes"]
    start = script.index("# storage.checkpoint")
    end = script.index("\n", script.index("SYNC=$!\n") + len("SYNC=$!\n")) + 1  # and the stop's definition
    stop = script[script.index("\nckpt_stop\n") + 1:].splitlines()[:2]
    assert stop == ["ckpt_stop", "ckpt_up || true"]
    install(tmp_path / "bin", "aws", FAKE_AWS)
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "LOG": str(tmp_path / "log")}
    return f"set -eu\nWORK={tmp_path / 'work'}\n" + script[start:end], "\n".join(stop) + "\n", env


@pytest.mark.parametrize("shell", SHELLS)
def test_the_checkpoint_sync_stopped_mid_upload_ends_before_the_last_upload(monkeypatch, tmp_path, shell):
    """Stopped while its upload runs, the loop ends (upload included) before the node's last
    upload starts and before the script ends: nothing it started holds SSM's output open.  (The
    kill it replaces returned at once: the last upload overlapped the loop's.)"""
    sync, stop, env = checkpoint_lines(monkeypatch, tmp_path)
    body = sync + f'while [ ! -e "$LOG.running" ]; do sleep 0.05; done\n{stop}echo ended >>"$LOG"\n'
    proc = subprocess.run([shell, "-c", body], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "log").read_text().splitlines() == ["loop upload", "loop upload ended", "upload", "ended"]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_checkpoint_sync_stopped_as_it_starts_leaves_no_sleep_behind(monkeypatch, tmp_path, shell):
    """The reported hang: stopped right after it started, a sync loop whose sleep outlived it kept
    the script's output open (here: the pipe subprocess.run reads to its end) for a minute.  The
    kill it replaces lost that race about once in 25 runs here (a TERM reaching the background sleep
    after its fork, before its exec, where dash's trap still caught it); the stop file has no race."""
    sync, stop, env = checkpoint_lines(monkeypatch, tmp_path)
    sync = sync.replace('-ge 1 ]', '-ge 60 ]')  # the minute of the job's script
    proc = subprocess.run([shell, "-c", sync + stop + "echo ended"], env=env, capture_output=True, text=True,
                          timeout=20)
    assert (proc.returncode, proc.stdout) == (0, "ended\n"), proc.stderr
