"""The neutral job states every provider maps its platform's states to.

Standard library only: the supervisors of the local and Docker providers write these states
to the state store, the provider base reads them back.
"""
from __future__ import annotations

from enum import Enum
from typing import Optional

from ..launch.exitcodes import EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK


class State(str, Enum):
    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    UNKNOWN = "UNKNOWN"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def exit_code(self) -> Optional[int]:
        """The CLI's exit code for a job that ended in this state (None while it runs)."""
        return _EXIT_CODES.get(self)


TERMINAL_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED)
# The terminal states as the state store keeps them (plain strings).
TERMINAL = tuple(state.value for state in TERMINAL_STATES)
_EXIT_CODES = {State.SUCCEEDED: EXIT_OK, State.FAILED: EXIT_JOB_FAILED, State.CANCELLED: EXIT_INTERRUPTED}
