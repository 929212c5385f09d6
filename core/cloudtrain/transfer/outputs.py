"""``cloudtrain outputs HANDLE [--dest DIR]``: bring a job's output (what its nodes wrote to
``CLOUDTRAIN_OUTPUT_DIR``, kept where ``storage.output`` says) to this machine.  Each provider
implements ``Provider.outputs(job_id, dest)``; this module holds what they share.

Downloaded outputs never ship with a job's code: a directory the download makes gets the marker
file ``codetree.OUTPUTS_MARKER`` (the code selection leaves out every directory that holds it,
wherever it is and whatever its name), and the default place, ``./outputs``, is a name the
selection never takes either."""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List

MARKER_TEXT = ("Downloaded by `cloudtrain outputs`: this directory is never shipped with a job's code.\n"
               "Remove this file to ship it.\n")


@contextmanager
def marked(dest: Path) -> Iterator[None]:
    """Run a download into ``dest``; afterwards (also when it failed half-way) mark ``dest`` when
    the download made it, or it was marked already.  A directory that held other files before
    (``-o .``: perhaps the code itself) is not marked."""
    from .codetree import OUTPUTS_MARKER
    dest = Path(dest)
    ours = not dest.exists() or (dest / OUTPUTS_MARKER).exists() or (dest.is_dir() and not any(dest.iterdir()))
    try:
        yield
    finally:
        if ours and dest.is_dir():
            (dest / OUTPUTS_MARKER).write_text(MARKER_TEXT, encoding="utf-8")


# what ``-o`` means on the other commands; ``outputs -o`` (a directory, kept for the scripts that use it) refuses them
FORMAT_WORDS = ("json", "yaml", "text", "table")


def destination(handle: str, dest=None, output=None) -> Path:
    """Where ``outputs`` downloads to: ``--dest DIR``, else ``-o DIR`` (its older spelling), else
    ``./outputs/<id>``.  ``-o json`` (the format option of every other command) is refused, not
    taken as a directory named ``json``."""
    from ..spec.errors import BadInput
    if dest and output:
        raise BadInput("outputs takes one directory: give --dest DIR (or its older spelling -o DIR), not both")
    if output in FORMAT_WORDS and not Path(output).is_dir():
        raise BadInput(f"outputs -o {output}: here -o names the directory to download into, not an output format "
                       f"(outputs prints one line); write --dest DIR, "
                       f"or --dest {output} for a directory named {output}")
    chosen = dest or output
    return Path(chosen) if chosen else default_dest(handle)


def default_dest(handle: str) -> Path:
    """``./outputs/<id>`` for ``PROVIDER://ID`` (``/`` in the id becomes ``-``)."""
    return Path("outputs") / handle.partition("://")[2].strip("/").replace("/", "-")


def copy_tree(source: Path, dest: Path) -> List[Path]:
    """Copy every file under ``source`` to the same place under ``dest``; the files written."""
    from ..spec.errors import BadInput
    if not source.is_dir():
        raise BadInput(f"the job's output directory {source} does not exist (the job wrote nothing to "
                       "CLOUDTRAIN_OUTPUT_DIR, or it was removed)")
    files = sorted(p for p in source.rglob("*") if p.is_file())
    if not files:
        raise BadInput(f"the job wrote nothing to CLOUDTRAIN_OUTPUT_DIR ({source} is empty; a job cancelled or failed "
                       "before it wrote has no outputs); nothing was downloaded")
    written = []
    for path in files:
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        written.append(target)
    return written
