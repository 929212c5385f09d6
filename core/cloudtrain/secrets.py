"""Secrets: resolved on the submitting machine at submit time, never rendered or printed."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional

from .errors import JobFileError

MASK = "***"


def resolve_secrets(job, environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``{NAME: value}`` for every secret of the job; a missing source is a ``JobFileError``
    (every missing one at once)."""
    values: Dict[str, str] = {}
    problems = _resolve(job, environ, values)
    if problems:
        from .loading import JobFileProblems
        JobFileProblems.raise_all(problems)
    return values


def secret_problems(job, environ: Optional[Mapping[str, str]] = None) -> List[JobFileError]:
    """A ``JobFileError`` for each secret whose source is missing (the values are read and
    dropped: a ``from_file`` that cannot be read is a problem too)."""
    return _resolve(job, environ, {})


def _resolve(job, environ, values: Dict[str, str]) -> List[JobFileError]:
    environ = os.environ if environ is None else environ
    source = job.source
    filename = str(source.path) if source and source.path else None
    problems = []
    for name, ref in job.secrets.items():
        line = source.line_of(("secrets", name)) if source else None
        if ref.from_env is not None:
            if ref.from_env not in environ:
                problems.append(JobFileError(f"environment variable {ref.from_env} is not set; export it before "
                                             "submitting", file=filename, line=line, field=f"secrets.{name}"))
            else:
                values[name] = environ[ref.from_env]
        else:
            path = Path(ref.from_file).expanduser()
            if not path.is_absolute() and source and source.path:
                path = source.path.parent / path
            try:
                values[name] = path.read_text().strip()
            except OSError as exc:
                problems.append(JobFileError(f"cannot read {path} ({exc.strerror}); fix from_file",
                                             file=filename, line=line, field=f"secrets.{name}"))
    return problems


class Masker:
    """Replaces every secret value in a text with ``***``."""

    def __init__(self, values: Iterable[str]):
        vals = sorted({v for v in values if v and len(v) >= 3}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in vals)) if vals else None

    def __call__(self, text: str) -> str:
        return self._pattern.sub(MASK, text) if self._pattern else text
