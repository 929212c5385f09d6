"""Which files of a job's ``code`` directory reach the nodes, and the nodes' working copies.

One selection for every provider: the cloud archives (``cloudtrain.shipping``) and the local and
Docker working copies take the same files.

- Always left out: VCS data, caches, virtual environments, local outputs (``NOT_COPIED``), and
  ``$CLOUDTRAIN_HOME`` when it lies inside the code directory (its runs hold copies of the code:
  copying them would recurse).
- ``.cloudtrainignore`` at the top of the code directory, in ``.gitignore`` syntax, leaves out
  more; without one, the top-level ``.gitignore`` is used (as SkyPilot does with ``.skyignore``).
- ``working_copies`` gives every node of a local or Docker job its own directory tree: the first
  is a real copy, the others hard links to its files (a 1 GB tree costs one copy per job, not
  one per node).  The files are shared between the job's nodes, as read-only code should be:
  a script writes new files (or into ``CLOUDTRAIN_OUTPUT_DIR``), never its code in place.

Standard library, plus ``pathspec`` only when an ignore file exists (the local supervisor imports
this module on every job start).
"""
from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Tuple

# Never copied to a node: VCS data, caches, virtual environments, and local outputs.
NOT_COPIED = (".git", "__pycache__", "*.pyc", ".venv", "venv", ".tox", ".pytest_cache", ".mypy_cache", "output")
IGNORE_FILES = (".cloudtrainignore", ".gitignore")


def _home() -> Path:
    return Path(os.environ.get("CLOUDTRAIN_HOME") or Path.home() / ".cloudtrain")


class CodeSelection:
    """The files of ``root`` that travel: ``files()`` yields them sorted, as (relative POSIX
    path, path); ``extra_ignored`` are more name patterns (shipping adds its launcher folder)."""

    def __init__(self, root, extra_ignored: Iterable[str] = ()):
        self.root = Path(root)
        self.names = NOT_COPIED + tuple(extra_ignored)
        self.ignore_file: Optional[Path] = next(
            (self.root / n for n in IGNORE_FILES if (self.root / n).is_file()), None)
        self._spec = None
        if self.ignore_file is not None:
            import pathspec  # only when there is a file to read
            lines = self.ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
            self._spec = pathspec.GitIgnoreSpec.from_lines(lines)
        self.excluded = self._excluded_dirs()

    def _excluded_dirs(self) -> set:
        """``$CLOUDTRAIN_HOME`` (resolved) when it is inside the code directory."""
        out = set()
        try:
            root = self.root.resolve()
            home = _home().resolve()
        except OSError:
            return out
        if home == root or root in home.parents:
            out.add(str(home))
        return out

    def _ignored(self, name: str, rel: str, full: str, is_dir: bool) -> bool:
        if any(fnmatch.fnmatch(name, p) for p in self.names):
            return True
        if is_dir and self.excluded and os.path.realpath(full) in self.excluded:
            return True
        if self._spec is not None:
            return self._spec.match_file(rel + "/" if is_dir else rel)
        return False

    def walk(self) -> Iterator[Tuple[str, List[str], List[str]]]:
        """``os.walk`` of the root, pruned: (relative dir, kept dirs, kept files), sorted."""
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel_dir = os.path.relpath(dirpath, self.root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
            prefix = rel_dir + "/" if rel_dir else ""
            dirnames[:] = sorted(d for d in dirnames
                                 if not self._ignored(d, prefix + d, os.path.join(dirpath, d), True))
            files = sorted(f for f in filenames
                           if not self._ignored(f, prefix + f, os.path.join(dirpath, f), False))
            yield rel_dir, list(dirnames), files

    def files(self) -> Iterator[Tuple[str, Path]]:
        for rel_dir, _, names in self.walk():
            base = self.root / rel_dir if rel_dir else self.root
            for name in names:
                yield (f"{rel_dir}/{name}" if rel_dir else name), base / name


def _copy_file(src: str, dest: str) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dest)
    else:
        shutil.copy2(src, dest)


def _link_file(src: str, dest: str) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dest)
    else:
        try:
            os.link(src, dest)
        except OSError:  # another file system, or one without hard links
            shutil.copy2(src, dest)


def copy_selected(selection: CodeSelection, dest, place: Callable[[str, str], None] = _copy_file,
                  source: Optional[Path] = None) -> None:
    """The selected tree under ``dest``; files come from ``source`` (default: the selection's
    root) by ``place`` (copy or hard link)."""
    dest, source = Path(dest), Path(source or selection.root)
    dest.mkdir(parents=True, exist_ok=True)
    for rel_dir, dirs, files in selection.walk():
        here = dest / rel_dir if rel_dir else dest
        src_dir = source / rel_dir if rel_dir else source
        for d in dirs:
            if os.path.islink(selection.root / rel_dir / d):  # a link to a directory stays a link
                os.symlink(os.readlink(selection.root / rel_dir / d), here / d)
            else:
                (here / d).mkdir(exist_ok=True)
        for name in files:
            place(str(src_dir / name), str(here / name))


def working_copies(root, destinations: List[Path]) -> None:
    """Every destination gets the selected code: the first a copy, the others hard links to it."""
    if not destinations:
        return
    selection = CodeSelection(root)
    first = Path(destinations[0])
    copy_selected(selection, first)
    for dest in destinations[1:]:
        copy_selected(selection, dest, place=_link_file, source=first)
