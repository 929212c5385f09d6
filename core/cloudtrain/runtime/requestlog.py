"""The request each job was submitted with, as ``render -o json`` prints it, kept for the dashboard.

``keep(handle, rendered)`` writes ``$CLOUDTRAIN_HOME/requests/<digest of the handle>.json``
(0600, in a 0700 folder) when a job is submitted; ``read(handle)`` gives it back.  The envelope
is what a dry run shows: a secret's value never appears in it (``***``), so nothing here is
more secret than ``render``'s output.  A request that cannot be written never fails a submit.

Beside it, where each of the job's secrets came from (``secrets: {NAME: {from_env: VAR}}``: the
name, the variable's name or the file's path; never a value), so that ``masker(handle)`` masks
the job's logs in any process, not only in the one that submitted it: the values it can read
here at that time (the same variable set in this shell, the same file), and whatever follows a
secret's name (``NAME=...``, ``"NAME": "..."``), and every token-shaped word.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from ..input.homedir import make_home, private_dir


def _path(handle: str) -> Path:
    digest = hashlib.sha256(handle.encode("utf-8")).hexdigest()[:32]
    return make_home() / "requests" / f"{digest}.json"


def keep(handle: str, rendered) -> None:
    path = _path(handle)
    private_dir(path.parent)
    data = json.dumps({"handle": handle, **rendered.envelope(), "secrets": secret_sources(rendered.job)},
                      ensure_ascii=False, default=str)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, path)


def read(handle: str) -> Optional[dict]:
    try:
        data = json.loads(_path(handle).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if data.get("handle") == handle else None


def secret_sources(job) -> Dict[str, Dict[str, str]]:
    """``{NAME: {"from_env": VAR} | {"from_file": absolute path}}`` of the job's secrets: where
    each value is read, never the value."""
    out: Dict[str, Dict[str, str]] = {}
    source = getattr(job, "source", None)
    for name, ref in (getattr(job, "secrets", None) or {}).items():
        if ref.from_env is not None:
            out[name] = {"from_env": ref.from_env}
        elif ref.from_file is not None:
            path = Path(ref.from_file).expanduser()
            if not path.is_absolute() and source is not None and source.path:
                path = Path(source.path).parent / path
            out[name] = {"from_file": str(path)}
    return out


class LogMask:
    """Masks a job's secrets in its log lines from what the request log knows (see the module's
    docstring); ``names`` are the secrets' names, ``values`` those readable here."""

    def __init__(self, names: List[str], values: List[str]):
        from ..input.secrets import Masker
        self.values = Masker(values)
        words = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        self.named = re.compile(rf"\b({words})([\"']?[ \t]*[=:][ \t]*[\"']?)([^\s\"',;}}]+)") if words else None

    def __call__(self, text: str) -> str:
        from ..spec.credentials import MASK, mask_text
        text = self.values(text)
        if self.named is not None:
            text = self.named.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
        return mask_text(text)


def masker(handle: str, environ: Optional[Mapping[str, str]] = None) -> LogMask:
    """The ``LogMask`` of job ``handle`` (names and values of its secrets as this process can
    read them now; a job with no request kept here: token shapes only)."""
    environ = os.environ if environ is None else environ
    sources = (read(handle) or {}).get("secrets") or {}
    values = []
    for where in sources.values():
        if where.get("from_env") in environ:
            values.append(environ[where["from_env"]])
        elif where.get("from_file"):
            try:
                values.append(Path(where["from_file"]).read_text().strip())
            except (OSError, ValueError):
                pass
    return LogMask(list(sources), values)
