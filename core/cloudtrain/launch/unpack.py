"""Unpack the job's code archive into the working directory of a node (standard library only).

``python3 -m cloudtrain.launch.unpack ARCHIVE [DEST]`` extracts ``cloudtrain.shipping.archive``'s
gzip'd tar (a Kubernetes pod reads it from the ConfigMap its provider created) into ``DEST``
(default: the current directory) before the node's command starts.  Only regular files and
directories under ``DEST`` are written: an absolute path, a ``..`` or a link in the archive is
refused (Python 3.8's ``tarfile`` has no extraction filter, so the members are checked here).
"""
from __future__ import annotations

import os
import sys
import tarfile
from typing import List, Optional

from ..exitcodes import EXIT_BAD_INPUT, EXIT_JOB_FAILED, EXIT_OK


class UnsafeArchive(ValueError):
    pass


def _target(dest: str, name: str) -> str:
    parts = name.replace("\\", "/").split("/")
    if name.startswith("/") or ".." in parts:
        raise UnsafeArchive(f"{name!r} would be written outside {dest}")
    return os.path.join(dest, *[p for p in parts if p not in ("", ".")])


def unpack(archive: str, dest: str = ".") -> int:
    """Extract ``archive`` into ``dest``; returns the number of files written."""
    dest = os.path.abspath(dest)
    count = 0
    with tarfile.open(archive, mode="r:gz") as tar:
        for member in tar.getmembers():
            target = _target(dest, member.name)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            if not member.isfile():
                raise UnsafeArchive(f"{member.name!r} is not a regular file")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = tar.extractfile(member)
            with open(target, "wb") as out:
                out.write(source.read() if source else b"")
            os.chmod(target, member.mode & 0o755)
            count += 1
    return count


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print("usage: python3 -m cloudtrain.launch.unpack ARCHIVE [DEST]", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        count = unpack(*args)
    except (OSError, tarfile.TarError, UnsafeArchive) as exc:
        print(f"cloudtrain: cannot unpack the code archive {args[0]}: {exc}", file=sys.stderr)
        return EXIT_JOB_FAILED
    print(f"cloudtrain: unpacked {count} code files into {os.path.abspath(args[1] if len(args) > 1 else '.')}",
          file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
