"""The rank shim (``cloudtrain.launch.failure.SHIM``) ends the way any interpreter does once
torchrun's ``run`` has returned: threads joined, ``atexit`` run, output flushed, what ``run``
dropped finalized (an object with ``__del__`` that only a reference cycle held), the exit code and the
report as before.  Only the exit's own garbage collections skip what is still alive then
(``gc.freeze``), which is what made bare torchrun's exit take 0.3-0.8 s (bench/:
launch-overhead); Python promises no finalizer for what still exists at exit.

A stand-in ``torch.distributed.run`` (on ``PYTHONPATH``) plays torchrun: what it leaves behind is
what an agent may leave, so a shortcut out of the interpreter (``os._exit``) fails here."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from cloudtrain.launch.failure import RESULT_FD, SHIM

STAND_IN = {
    "torch/__init__.py": "",
    "torch/distributed/__init__.py": "",
    "torch/distributed/elastic/__init__.py": "",
    "torch/distributed/elastic/multiprocessing/__init__.py": "",
    "torch/distributed/elastic/multiprocessing/errors.py": """
        class Failure:
            def __init__(self, exitcode):
                self.exitcode, self.local_rank, self.error_file = exitcode, 1, "<N/A>"
        class ChildFailedError(Exception):
            def __init__(self, exitcode):
                self.failure = Failure(exitcode)
            def get_first_failure(self):
                return 3, self.failure
    """,
    "torch/distributed/elastic/multiprocessing/api.py": """
        class SignalException(Exception):
            def __init__(self, sigval):
                self.sigval = sigval
    """,
    # what an agent may leave when run returns: an atexit hook, an object with a finalizer that
    # only a reference cycle it dropped holds, a thread still finishing
    "torch/distributed/run.py": """
        import atexit, gc, os, sys, threading, time
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        OUT = os.environ["STAND_IN_OUT"]
        def parse_args(argv):
            class Args:
                log_dir = OUT
                code = int(argv[0])
            return Args()
        class Finalized:
            def __del__(self):
                with open(os.path.join(OUT, "finalized"), "w") as f:
                    f.write("yes")
        def run(args):
            atexit.register(lambda: open(os.path.join(OUT, "atexit"), "w").write(
                "frozen %d" % gc.get_freeze_count()))
            cycle = Finalized()
            cycle.self = cycle
            def late():
                time.sleep(0.3)
                open(os.path.join(OUT, "thread"), "w").write("done")
            threading.Thread(target=late).start()
            print("agent says bye", flush=False)
            if args.code:
                raise ChildFailedError(args.code)
    """,
}


def run_shim(tmp_path, code: int):
    root = tmp_path / "stand-in"
    for rel, text in STAND_IN.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    out = tmp_path / "out"
    out.mkdir()
    read_end, write_end = os.pipe()
    env = dict(os.environ, PYTHONPATH=str(root), STAND_IN_OUT=str(out), **{RESULT_FD: str(write_end)})
    try:
        proc = subprocess.run([sys.executable, "-c", SHIM, str(code)], env=env, pass_fds=(write_end,),
                              capture_output=True, text=True, timeout=60)
    finally:
        os.close(write_end)
    with os.fdopen(read_end) as f:
        report = json.loads(f.read() or "{}")
    return proc, report, out


@pytest.mark.parametrize("code", [0, 7], ids=["succeeded", "rank-failed"])
def test_the_shim_ends_like_any_interpreter_after_torchrun_returns(tmp_path, code):
    proc, report, out = run_shim(tmp_path, code)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "agent says bye\n"                       # stdout flushed
    assert (out / "thread").read_text() == "done"                  # the thread was joined
    assert (out / "finalized").read_text() == "yes"                # what run dropped, finalized
    assert (out / "atexit").read_text().startswith("frozen ")      # atexit ran ...
    assert int((out / "atexit").read_text().split()[1]) > 0        # ... with torch's heap frozen
    if code:
        assert (report["rank"], report["local_rank"], report["exitcode"]) == (3, 1, code)
    else:
        assert "rank" not in report and report["log_dir"] == str(out)
