"""Colour on a terminal: only when the stream is a TTY, ``NO_COLOR`` is not set (https://no-color.org:
"when present and not an empty string, prevents the addition of ANSI color") and ``TERM`` is not
``dumb``; never in a pipe, a file or JSON output (callers colour text output only).
``FORCE_COLOR`` (non-empty) turns it on where it would be off (e.g. a pager)."""
from __future__ import annotations

import os
import sys
from typing import Optional, TextIO

RESET = "\033[0m"
CODES = {"ok": "32", "bad": "31", "warn": "33", "bold": "1", "dim": "2"}


def enabled(stream: Optional[TextIO] = None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def paint(text: str, style: str, stream: Optional[TextIO] = None) -> str:
    return f"\033[{CODES[style]}m{text}{RESET}" if enabled(stream) else text


def ok(text: str, stream=None) -> str:
    return paint(text, "ok", stream)


def bad(text: str, stream=None) -> str:
    return paint(text, "bad", stream)


def warn(text: str, stream=None) -> str:
    return paint(text, "warn", stream)


def bold(text: str, stream=None) -> str:
    return paint(text, "bold", stream)


def dim(text: str, stream=None) -> str:
    return paint(text, "dim", stream)
