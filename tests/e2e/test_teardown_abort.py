"""A rank aborted in the framework's teardown after a clean end is told apart from a real failure
(issue 39, item 9).  Real ``cloudtrain launch`` runs of two ranks under torchrun; rank 1 ends
with libstdc++'s ``std::terminate`` (what gloo's threads meet at exit: "terminate called without
an active exception", SIGABRT), called

- from ``exit()``'s own handlers, after the interpreter finished (the script printed its last
  line and returned): the node ends 0, and the launcher says it was a teardown abort;
- while the script still runs (after a print, before its end): a real failure, exit 134, the
  launcher names the rank and its signal."""
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e

SCRIPT = textwrap.dedent('''
    import ctypes, ctypes.util, os, sys
    terminate = ctypes.CDLL(ctypes.util.find_library("stdc++"))._ZSt9terminatev
    rank = int(os.environ["RANK"])
    print("rank %d: last line" % rank, flush=True)
    if rank == 1 and sys.argv[1] == "at-exit":   # after the interpreter: exit()'s handlers
        libc = ctypes.CDLL(ctypes.util.find_library("c"))  # (glibc's atexit is __cxa_atexit's)
        libc.__cxa_atexit(ctypes.cast(terminate, ctypes.c_void_p), None, None)
    elif rank == 1 and sys.argv[1] == "mid-work":
        terminate()
        print("never", flush=True)
''')


def launch(tmp_path, when):
    (tmp_path / "t.py").write_text(SCRIPT)
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "CLOUDTRAIN_MASTER_PORT": "0"}
    return subprocess.run([sys.executable, "-m", "cloudtrain.launch", "--type", "ddp", "--nproc-per-node", "2",
                           "--", sys.executable, "t.py", when], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


def test_an_abort_after_the_script_ended_is_a_teardown_abort_and_not_a_failure(tmp_path):
    proc = launch(tmp_path, "at-exit")
    assert "rank 1: last line" in proc.stdout and "terminate called" in proc.stderr  # it did abort
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("cloudtrain launch: ")]
    assert len(said) == 1 and "rank 1 (local rank 1) was aborted (signal 6) in the framework's teardown" in said[0]
    assert "failed first" not in proc.stderr


def test_an_abort_while_the_script_runs_is_a_failure(tmp_path):
    proc = launch(tmp_path, "mid-work")
    assert "rank 1: last line" in proc.stdout and "never" not in proc.stdout
    assert proc.returncode == 134, proc.stderr
    assert "cloudtrain launch: rank 1 (local rank 1) failed first: killed by signal 6" in proc.stderr
    assert "teardown" not in proc.stderr
