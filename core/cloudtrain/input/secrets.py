"""Secrets: resolved on the submitting machine at submit time, never rendered or printed."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional

from ..spec.errors import JobFileError
from ..spec.problems import JobFileProblems

MASK = "***"


def resolve_secrets(job, environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``{NAME: value}`` for every secret of the job; a missing source is a ``JobFileError``
    (every missing one at once)."""
    values: Dict[str, str] = {}
    problems = _resolve(job, environ, values)
    if problems:
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
        if ref.from_file is not None and "\x00" in ref.from_file:
            problems.append(JobFileError("from_file holds a NUL byte, which no path can: remove it",
                                         file=filename, line=line, field=f"secrets.{name}"))
            continue
        if ref.from_env is not None:
            if ref.from_env not in environ:
                problems.append(JobFileError(f"environment variable {ref.from_env} is not set; export it before "
                                             "submitting", file=filename, line=line, field=f"secrets.{name}"))
            else:
                values[name] = environ[ref.from_env]
        else:
            assert ref.from_file is not None  # SecretRef holds exactly one of from_env and from_file
            path = Path(ref.from_file).expanduser()
            if not path.is_absolute() and source and source.path:
                path = source.path.parent / path
            try:
                values[name] = path.read_text().strip()
            except OSError as exc:
                problems.append(JobFileError(f"cannot read {path} ({exc.strerror}); fix from_file",
                                             file=filename, line=line, field=f"secrets.{name}"))
    for name in [n for n, v in values.items() if "\x00" in v]:
        problems.append(JobFileError("its value holds a NUL byte, which no environment variable can carry: fix "
                                     "the secret's source", file=filename,
                                     line=source.line_of(("secrets", name)) if source else None,
                                     field=f"secrets.{name}"))
        del values[name]
    return problems


class Masker:
    """Replaces every secret value in a text with ``***``.

    A value of several lines (a PEM key, a JSON credential) is masked as a whole and line by
    line: the job may print it as it is, one line per write, indented, or inside JSON (its
    lines joined by ``\\n``), and a log is read line by line.  Since each of its lines is masked
    on its own, a reader that masks whole lines holds nothing back across lines: only the line
    it has not finished reading (see ``supervise.LogSink``)."""

    MIN_LENGTH = 3  # shorter pieces say nothing about the value, and would mask half of every log

    def __init__(self, values: Iterable[str]):
        self._pattern = _pattern(masked_pieces(values, self.MIN_LENGTH))

    def __call__(self, text: str) -> str:
        return self._pattern.sub(MASK, text) if self._pattern else text


def masked_pieces(values: Iterable[str], min_length: int = 3) -> List[str]:
    """What a masker replaces for ``values``: each value, its JSON-escaped form, and each line of
    a value of several lines (stripped), the longest first so a whole value becomes one ``***``."""
    import json
    pieces = set()
    for value in values:
        if not value:
            continue
        pieces.update({value, value.strip(), json.dumps(value)[1:-1]})
        if "\n" in value or "\r" in value:
            pieces.update(line.strip() for line in value.splitlines())
    return sorted((p for p in pieces if len(p) >= min_length), key=len, reverse=True)


def _pattern(pieces: List[str]):
    return re.compile("|".join(re.escape(p) for p in pieces)) if pieces else None
