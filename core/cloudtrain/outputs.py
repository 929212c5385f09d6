"""``cloudtrain outputs HANDLE [-o DIR]``: bring a job's output (what its nodes wrote to
``CLOUDTRAIN_OUTPUT_DIR``, kept where ``storage.output`` says) to this machine.  Each provider
implements ``Provider.outputs(job_id, dest)``; this module holds what they share."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import List


def default_dest(handle: str) -> Path:
    """``./outputs/<id>`` for ``PROVIDER://ID`` (``/`` in the id becomes ``-``)."""
    return Path("outputs") / handle.partition("://")[2].strip("/").replace("/", "-")


def copy_tree(source: Path, dest: Path) -> List[Path]:
    """Copy every file under ``source`` to the same place under ``dest``; the files written."""
    from .errors import BadInput
    if not source.is_dir():
        raise BadInput(f"the job's output directory {source} does not exist (the job wrote nothing to "
                       "CLOUDTRAIN_OUTPUT_DIR, or it was removed)")
    written = []
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        written.append(target)
    return written
