"""What kind of failure ended an attempt, read from the platform's own words.

``classify(provider, status)`` -> ``(kind, words)``: ``kind`` is one of ``preemption``,
``capacity``, ``node-failure``, ``hang`` (the kinds ``restart_on`` names), ``exit-code`` (the
user's code exited with ``status.exit_code``), or ``other``; ``words`` is the part of the
platform's message it was read from.  The platform is asked first: if it says the nodes were
taken away or could not be had, that is the kind, whatever the code exited with; only when it
says nothing of the kind is the user's exit code consulted (SkyPilot's managed jobs do the same:
``sky/jobs/recovery_strategy.py``, "check the cluster status before the user's exit code").

The platform's words are its provider class's ``failure_words`` (docs/plugins.md, "The
platform's facts"), each entry next to where the platform writes them.
"""
from __future__ import annotations

import re
from typing import Optional, Tuple

PREEMPTION, CAPACITY, NODE_FAILURE, HANG, EXIT_CODE, OTHER = (
    "preemption", "capacity", "node-failure", "hang", "exit-code", "other")
KINDS = (PREEMPTION, CAPACITY, NODE_FAILURE, HANG)
# restarts that spend the preemption budget (the platform took the capacity); the others spend
# the failure budget (docs/controller.md, "Budgets")
PLATFORM_KINDS = frozenset({PREEMPTION, CAPACITY})

# The launcher's own words (core/cloudtrain/launch/stall.py writes STALLED as the node's reason).
STALLED = "stalled: no output for"

_EXIT = re.compile(r"exited with code (\d+)")


def classify(provider: str, message: str, exit_code: Optional[int] = None) -> Tuple[str, str]:
    """``(kind, words)`` of a failure ``provider`` reported with ``message`` (see the module)."""
    text = message or ""
    if STALLED in text:
        return HANG, text[text.index(STALLED):][:120]
    from ..extend.plugins import get_provider_class
    for pattern, kind in get_provider_class(provider).failure_words:
        found = re.search(pattern, text)
        if found:
            return kind, found.group(0)
    code = exit_code
    if code is None:
        found_code = _EXIT.search(text)
        code = int(found_code.group(1)) if found_code else None
    if code is not None and code > 0:
        return EXIT_CODE, str(code)
    return OTHER, text.splitlines()[0][:120] if text else ""


def covered(kind: str, words: str, restart_on) -> bool:
    """Whether ``restart_on`` (the job's list: kind names and ``ExitCodes``) covers this failure."""
    if kind in KINDS:
        return kind in [k for k in restart_on if isinstance(k, str)]
    if kind == EXIT_CODE and words.isdigit():
        return any(int(words) in getattr(k, "exit_codes", ()) for k in restart_on)
    return False
