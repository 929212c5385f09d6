"""The exit codes of every cloudtrain command, on the submitting machine and on the nodes.

Standard library only: the node launcher (``cloudtrain.launch``, shipped to the nodes with
this module), the local supervisors and the CLI all use these names.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_JOB_FAILED = 1       # the job (or a node's command) failed
EXIT_BAD_INPUT = 2        # the job file, its options or the command line are wrong; nothing started
EXIT_PLATFORM = 3         # the platform refused the request or could not be reached
EXIT_COMMAND_NOT_FOUND = 127  # as a shell reports a command it cannot find
EXIT_SIGNAL_BASE = 128    # a process ended by signal N exits 128 + N, as a shell reports it


def killed_by(signum: int) -> int:
    """The exit code of a process ended by signal ``signum``."""
    return EXIT_SIGNAL_BASE + int(signum)


EXIT_INTERRUPTED = killed_by(2)   # 130: SIGINT (Ctrl-C); a cancelled job ends with it
EXIT_KILLED = killed_by(9)        # 137: SIGKILL (a removed container, the OOM killer)
EXIT_BROKEN_PIPE = killed_by(13)  # 141: SIGPIPE, as a command killed by a closed pipe exits
