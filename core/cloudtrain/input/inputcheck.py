"""What no job field may hold, whatever the provider: checked at validate (so at render and
submit too), each problem at its line, before anything is started or sent.

- a NUL byte anywhere (no argument, path or environment variable can carry one: it would fail
  later, on a node), and in an ``env`` value any other control character but tab and newline
  (a terminal would obey an escape sequence in a render or a log; a carriage return hides
  what precedes it);
- a URI with user info (``s3://user:password@bucket``, ``https://token@host``, any scheme) in
  ``storage``, ``image`` or the provider's options: a credential in clear, which every render,
  request and platform console would show.  The platform's credential chain, or ``secrets:``,
  gives it instead;
and, as a warning naming the variable (never its value), an ``env`` value shaped like a
credential: ``env`` is rendered and kept in the platform's job definition, ``secrets:`` is not;
the same for a credential written into ``setup`` or ``command`` (a token's shape, a URI's user
info, ``NAME=value`` or ``--option value`` under a secret's name), which every render, the
platform's console and the nodes' process lists show.
"""
from __future__ import annotations

import re
from typing import List, Tuple

from ..spec.credentials import TOKEN_SHAPES, has_userinfo, looks_like, secret_named

# C0 controls but tab and newline, DEL, C1 controls (U+009B is a terminal's CSI)
ENV_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
URI_FIELDS = ("storage", "image", "providers")


def _leaves(data, at: tuple = ()):
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaves(value, at + (key,))
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            yield from _leaves(value, at + (i,))
    else:
        yield at, data


def problems(job, provider: str) -> List[Tuple[tuple, str]]:
    """``(location in the job, message)`` of every value no job may hold; ``provider``'s own
    section is checked, the others' (unused here) are not."""
    out = []
    for loc, value in _leaves(job.model_dump(mode="json")):
        if not isinstance(value, str) or (loc[0] == "providers" and loc[1:2] != (provider,)) or loc[0] == "secrets":
            continue  # (secrets: their sources are checked as they are read, secrets.py)
        if loc[0] == "env":
            bad = ENV_CONTROL.search(value)
            if bad:
                out.append((loc, f"holds the control character U+{ord(bad.group()):04X}; an environment variable's "
                                 "value is text (tab and newline are the only control characters it may hold): "
                                 "remove it"))
        elif "\x00" in value:
            out.append((loc, "holds a NUL byte, which no argument, path or variable can carry: remove it"))
        if loc[0] in URI_FIELDS and has_userinfo(value):
            out.append((loc, "a URI with user info (user:password@) puts a credential in clear in every render and "
                             "request: give the URI without it; the platform's credential chain (or secrets:) "
                             "supplies the credential"))
    return out


def credential_env(job) -> List[Tuple[tuple, str]]:
    """``(location, warning)`` for each ``env`` value that looks like a credential (its shape, or
    a secret's name with a value of some length); the warning names the variable, never the value."""
    out = credential_commands(job)
    for name, value in sorted(job.env.items()):
        found = looks_like(value)
        if found is None and not (secret_named(name) and len(value.strip()) >= 8):
            continue
        what = found[0] if found else "a secret (by its name)"
        out.append((("env", name), f"looks like {what}: env is shown in renders and kept in the platform's job "
                                   f"definition; move it to secrets: {{{name}: {{from_env: {name}}}}} (read on your "
                                   "machine at submit, never printed)"))
    return out


# NAME=value (an assignment, or an environment given to a command) and --name value / --name=value;
# a value that refers to a variable ($NAME, ${NAME}) is not one
_ASSIGNED = re.compile(r"(?:^|[\s;&|(])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=[\'\"]?(?!\$)([^\s\'\";&|]{8,})")
_OPTION = re.compile(r"(?:^|\s)--?([A-Za-z][A-Za-z0-9_-]*)(?:=|\s+)[\'\"]?(?!\$)([^\s\'\";&|-][^\s\'\";&|]{7,})")


def _credential_in(text: str):
    """What a credential in the shell text ``text`` looks like, or None (never the value)."""
    for shape, kind in TOKEN_SHAPES:
        if shape.search(text):
            return kind[0]
    if has_userinfo(text):
        return "a URI with user info (user:password@)"
    for pattern in (_ASSIGNED, _OPTION):
        for match in pattern.finditer(text):
            if secret_named(match.group(1).replace("-", "_")):
                return f"a secret given to {match.group(1)}"
    return None


def credential_commands(job) -> List[Tuple[tuple, str]]:
    """``(location, warning)`` for ``setup`` and ``command`` when they hold something shaped like
    a credential; the warning says what it looks like, never the value."""
    fields: List[Tuple[tuple, str]] = [(("setup",), job.setup)] if isinstance(getattr(job, "setup", None), str) else []
    command = getattr(job, "command", None)
    if isinstance(command, str):
        fields.append((("command",), command))
    elif isinstance(command, list):
        joined = " ".join(str(part) for part in command)
        fields += [(("command", i), str(part)) for i, part in enumerate(command)]
        fields.append((("command",), joined))
    out: List[Tuple[tuple, str]] = []
    for loc, text in fields:
        what = _credential_in(text)
        if what is None or any(found[0][:1] == loc[:1] for found in out):
            continue
        out.append((loc, f"holds what looks like {what}: {loc[0]} is shown in every render and kept in the "
                         "platform's job definition; give it through secrets: {NAME: {from_env: VAR}} (read on "
                         "your machine at submit, never printed) and write $NAME here"))
    return out
