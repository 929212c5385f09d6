"""The request each job was submitted with, as ``render -o json`` prints it, kept for the dashboard.

``keep(handle, rendered)`` writes ``$CLOUDTRAIN_HOME/requests/<digest of the handle>.json``
(0600, in a 0700 folder) when a job is submitted; ``read(handle)`` gives it back.  The envelope
is what a dry run shows: a secret's value never appears in it (``***``), so nothing here is
more secret than ``render``'s output.  A request that cannot be written never fails a submit.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from ..input.homedir import make_home, private_dir


def _path(handle: str) -> Path:
    digest = hashlib.sha256(handle.encode("utf-8")).hexdigest()[:32]
    return make_home() / "requests" / f"{digest}.json"


def keep(handle: str, rendered) -> None:
    path = _path(handle)
    private_dir(path.parent)
    data = json.dumps({"handle": handle, **rendered.envelope()}, ensure_ascii=False, default=str)
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
