"""“Did you mean …?” for a misspelt name (a field, a provider, a command)."""
from __future__ import annotations

import difflib
from typing import Iterable, Optional


def nearest(word: str, choices: Iterable[str]) -> Optional[str]:
    """The choice closest to ``word``, if one is close enough to be a likely typo."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` or ``""`` when no choice is close."""
    match = nearest(word, choices)
    return f"; did you mean {match!r}?" if match else ""
