"""``cloudtrain outputs HANDLE [--dest DIR]``: bring a job's output (what its nodes wrote to
``CLOUDTRAIN_OUTPUT_DIR``, kept where ``storage.output`` says) to this machine.  Each provider
implements ``Provider.outputs(job_id, dest)``; this module holds what they share.

Downloaded outputs never ship with a job's code: a directory the download makes gets the marker
file ``codetree.OUTPUTS_MARKER`` (the code selection leaves out every directory that holds it,
wherever it is and whatever its name), and the default place, ``./outputs``, is a name the
selection never takes either."""
from __future__ import annotations

import errno
import os
import shutil
import stat
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Tuple

from ..spec.errors import CloudtrainWarning

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


def still_running(handle: str, state: str, source: Path) -> None:
    """Before ``copy_tree`` of a job that has not ended: refuse when it has written nothing yet
    (it is not a failed job's empty output), else warn that what it wrote so far comes."""
    from ..spec.errors import BadInput
    if not source.is_dir() or not any(source.iterdir()):
        raise BadInput(f"{handle} is still {state} and has written nothing to CLOUDTRAIN_OUTPUT_DIR yet; "
                       f"cloudtrain wait {handle}, then cloudtrain outputs {handle}")
    warnings.warn(CloudtrainWarning(f"{handle} is still {state}: downloading what it wrote so far "
                                    f"(cloudtrain wait {handle}, then outputs again, for all of it)"), stacklevel=2)


def copy_tree(source: Path, dest: Path) -> List[Path]:
    """Copy every file under ``source`` to the same place under ``dest``; the files written.

    Nothing in ``source`` is followed: the job (a container's image, a script) writes there, and
    a link it made may point anywhere on this machine (``~/.aws/credentials``).  A link whose
    target stays inside ``source`` is copied as a link (a checkpoint's ``latest``); any other link,
    and whatever is not a regular file (a FIFO, a socket, a device), is left out and named in a
    warning.  Only regular files are opened, each without following a link."""
    from ..spec.errors import BadInput
    source, dest = Path(source), Path(dest)
    if not source.is_dir():  # (the directory itself is the user's setting, storage.output: a link there is theirs)
        raise BadInput(f"the job's output directory {source} does not exist (the job wrote nothing to "
                       "CLOUDTRAIN_OUTPUT_DIR, or it was removed)")
    files, links, left_out = _entries(source)
    if not files and not links:
        raise BadInput(f"the job wrote nothing to CLOUDTRAIN_OUTPUT_DIR ({source} is empty; a job cancelled or failed "
                       "before it wrote has no outputs); nothing was downloaded")
    written = []
    for rel in files:
        target = _fresh(dest, rel)
        _copy_file(source / rel, target)
        written.append(target)
    for rel, pointee in links:
        target = _fresh(dest, rel)
        os.symlink(pointee, target)
        written.append(target)
    if left_out:
        more = f" and {len(left_out) - 10} more" if len(left_out) > 10 else ""
        shown = ", ".join(str(rel) for rel in left_out[:10]) + more
        warnings.warn(CloudtrainWarning(
            f"left out of the download {len(left_out)} entr{'ies' if len(left_out) > 1 else 'y'} of the job's output "
            f"that {'are not files' if len(left_out) > 1 else 'is not a file'} or link outside it "
            f"(a link is never followed): {shown}"), stacklevel=2)
    return written


def _entries(source: Path) -> Tuple[List[Path], List[Tuple[Path, str]], List[Path]]:
    """(regular files, links that stay inside ``source`` with their targets, everything left out),
    relative to ``source``; directories are walked without following links."""
    files: List[Path] = []
    links: List[Tuple[Path, str]] = []
    left_out: List[Path] = []
    root = os.path.realpath(source)
    for folder, dirs, names in os.walk(source, followlinks=False):
        here = Path(folder)
        for name in sorted(dirs + names):
            path = here / name
            rel = path.relative_to(source)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                pointee = os.readlink(path)
                inside = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(path)), pointee))
                if not os.path.isabs(pointee) and (inside + os.sep).startswith(root + os.sep):
                    links.append((rel, pointee))
                else:
                    left_out.append(rel)
            elif stat.S_ISREG(info.st_mode):
                files.append(rel)
            elif not stat.S_ISDIR(info.st_mode):
                left_out.append(rel)
    return sorted(files), sorted(links), sorted(left_out)


def _fresh(dest: Path, rel: Path) -> Path:
    """``dest/rel`` with its folders made and nothing at that name (a link there from an earlier
    download is replaced, not written through)."""
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists() and not target.is_dir():
        target.unlink()
    return target


def _copy_file(path: Path, target: Path) -> None:
    """``path``'s bytes, mode and times into ``target``; ``path`` opened without following a link
    (a link swapped in after the walk fails instead)."""
    from ..spec.errors import BadInput
    changed = BadInput(f"{path} stopped being a file while the output was copied (the job still writes there?); "
                       "download again once it ended")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise changed from None
        raise
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise changed
        with open(target, "xb") as out:
            shutil.copyfileobj(src, out)
    shutil.copystat(path, target, follow_symlinks=False)
