"""``cloudtrain exec`` and ``cloudtrain stacks`` (issue 43) where they cannot reach in: one line,
exit 2, nothing sent; and the faulthandler a local job's ranks arm for ``stacks``, which is the
only way a rank is ever signalled."""
import signal
import subprocess
import sys
import time

import pytest

from cloudtrain.launch import loopback_site
from cloudtrain.runtime.stacks import armed_signal, dump_lines, rank_of

from conftest import run_cli


@pytest.mark.parametrize("handle", ["sagemaker://us-east-1/job-1", "azure://sub/rg/ws/job-1", "tione://ap-1/j"])
def test_exec_where_the_platform_has_no_way_in_says_so_in_one_line(handle, home):
    done = run_cli("exec", handle, "--", "nvidia-smi")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "has no way into a running node" in done.stderr


def test_stacks_where_the_platform_has_none_says_so_in_one_line(home):
    done = run_cli("stacks", "sagemaker://us-east-1/job-1")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no way to read a running rank" in done.stderr


def test_exec_needs_a_command_unless_it_is_interactive(home):
    done = run_cli("exec", "local://nothing-1")
    assert done.returncode == 2 and "exec needs a command after --" in done.stderr


SLEEPER = """
import os, signal, sys, time
sys.path.insert(0, {site!r})
import loopback_site
if os.environ.get("OWN_HANDLER"):
    signal.signal(signal.SIGUSR2, lambda *a: print("own handler", flush=True))
armed = loopback_site.register_stacks()

def waiting_here():
    print(armed, flush=True)  # from in here: once the test reads it, the stack is this function's
    time.sleep(60)

waiting_here()
"""


def _sleeper(tmp_path, env):
    import os
    from pathlib import Path
    site = str(Path(loopback_site.__file__).parent)
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER.format(site=site)], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline().strip()
    return proc, first


def test_a_rank_that_armed_faulthandler_writes_its_stack_and_goes_on(tmp_path):
    proc, armed = _sleeper(tmp_path, {"CLOUDTRAIN_STACKS_SIGNAL": "SIGUSR2", "RANK": "3", "LOCAL_RANK": "1"})
    try:
        assert armed == "True" and armed_signal(proc.pid) == signal.SIGUSR2 and rank_of(proc.pid) == 3
        proc.send_signal(signal.SIGUSR2)
        time.sleep(1.0)
        assert proc.poll() is None  # it goes on
    finally:
        proc.kill()
    err = proc.communicate()[1].splitlines()
    assert any("waiting_here" in line for line in dump_lines(err)), err


@pytest.mark.parametrize("env", [{}, {"CLOUDTRAIN_STACKS_SIGNAL": "SIGUSR2", "OWN_HANDLER": "1"},
                                 {"CLOUDTRAIN_STACKS_SIGNAL": "SIGTERM"}])
def test_a_process_that_did_not_arm_it_is_never_taken_for_one(tmp_path, env):
    proc, armed = _sleeper(tmp_path, env)
    try:
        assert armed == "False"
        if "OWN_HANDLER" not in env:
            assert armed_signal(proc.pid) is None
    finally:
        proc.kill()
        proc.communicate()
