"""Check, then unpack, the job's code archive into the working directory of a node (standard
library only, Python 3.8+, with or without ``tarfile``'s extraction filters).

``python3 -m cloudtrain.launch.unpack [--sha256 HEX] ARCHIVE [DEST]`` extracts
``cloudtrain.transfer.shipping``'s gzip'd tar into ``DEST`` (default: the current directory).  With
``--sha256`` the archive's digest is checked first: a different archive writes nothing.

``python3 -m cloudtrain.launch.unpack --url-file FILE --sha256 HEX [DEST]``: the archive is in an
object store; ``FILE`` (a mounted Secret) holds a time-limited GET URL for it.  It is fetched
with ``urllib`` (a dropped connection or a 5xx is tried again), its sha256 must be ``HEX`` (the
digest the pod spec names), then it is unpacked as above.  The URL is never printed: it grants
access until it expires; messages name the host only.

What is written (``unpack``), whatever the archive holds:

- members are streamed to disk in chunks (a 1 GiB member costs no more memory than a small one);
- an absolute name, a ``..``, a hard link, a device, a FIFO or any other special member refuses
  the whole archive before that member is written;
- regular files and directories only under ``DEST``, never through a symbolic link (a file is
  opened with ``O_NOFOLLOW`` after any link of its name is removed; a link met among the parent
  directories refuses the archive); modes keep ``rwx`` for the owner and ``r-x`` for the others,
  never setuid, setgid, sticky or group/other write;
- symbolic links last, once every file is written, and only those that resolve inside ``DEST``
  (after every link is made: a chain through another link counts); one that leaves it is
  skipped and named on stderr (cloudtrain warned about it when it packed the code).

Nodes without cloudtrain (SageMaker, EC2, TI-ONE, ModelArts) run ``BOOTSTRAP`` through
``python3 -c``: it checks the archive's sha256 itself, then runs this file's source from the
checked archive, so the unpacker the node runs is this one.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import tarfile
import tempfile
import time
from typing import List, Optional, Tuple

try:
    from .exitcodes import EXIT_BAD_INPUT, EXIT_JOB_FAILED, EXIT_OK
except ImportError:  # run from a checked archive by BOOTSTRAP: no package around this file
    EXIT_OK, EXIT_JOB_FAILED, EXIT_BAD_INPUT = 0, 1, 2

FETCH_ATTEMPTS = 4
FETCH_TIMEOUT = 60.0  # seconds without a byte before an attempt is given up
CHUNK = 1 << 20       # bytes read and written at a time: hashing, fetching, extracting

# Where this file is in an archive that carries the launcher bundle (shipping.LAUNCHER_DIR).
SOURCE_IN_ARCHIVE = ".cloudtrain/cloudtrain/launch/unpack.py"
# ``python3 -c BOOTSTRAP --sha256 HEX ARCHIVE DEST``: the archive's sha256 must be HEX, then this
# file's source, read from it, unpacks it.  At most 256 characters: SageMaker's limit on a
# ContainerEntrypoint item (botocore's TrainingContainerEntrypointString), the tightest one.
BOOTSTRAP = ("import hashlib,sys,tarfile as t\n"
             "s,a=sys.argv[2:4];h=hashlib.sha256();f=open(a,'rb');b=1\n"
             "while b:b=f.read(9**6);h.update(b)\n"
             "h.hexdigest()==s or sys.exit(a+': sha256 differs')\n"
             f"exec(t.open(a).extractfile('{SOURCE_IN_ARCHIVE}').read())")
DIFFERS = "sha256 differs"  # BOOTSTRAP's and check_digest's word for a changed archive


def bootstrap_argv(python: str, sha256: str, archive: str, dest: str) -> List[str]:
    """The argv a node without cloudtrain runs to check and unpack ``archive`` (see ``BOOTSTRAP``)."""
    return [python, "-c", BOOTSTRAP, "--sha256", sha256, archive, dest]


class UnsafeArchive(ValueError):
    pass


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def check_digest(archive: str, sha256: str) -> None:
    actual = file_sha256(archive)
    if actual != sha256.lower():
        raise UnsafeArchive(f"{DIFFERS}: it is {actual}, the job names {sha256}; the archive was changed "
                            "after it was packed: submit the job again")


def _parts(name: str) -> List[str]:
    """``name``'s path components under DEST; raises for an absolute name or a ``..``."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or ".." in parts or "\0" in name:
        raise UnsafeArchive(f"{name!r} would be written outside the code directory")
    parts = [p for p in parts if p not in ("", ".")]
    if not parts:
        raise UnsafeArchive(f"{name!r} names no file")
    return parts


def _directory(dest: str, parts: List[str]) -> str:
    """``dest/parts...`` as a real directory (made if missing); raises where a component is a
    symbolic link or a file: nothing is ever written through a link."""
    path = dest
    for part in parts:
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            os.mkdir(path, 0o755)
            continue
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeArchive(f"{path!r} is a symbolic link: nothing is written through one")
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeArchive(f"{path!r} is a file where the archive has a directory")
    return path


def _clear(path: str) -> None:
    """Remove a file or link named ``path`` (a later member of the same name replaces it, as tar
    does); a directory there refuses the member."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise UnsafeArchive(f"{path!r} is a directory where the archive has a file")
    os.unlink(path)


def _write(tar, member, path: str) -> None:
    source = tar.extractfile(member)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as out:
        if source is not None:
            shutil.copyfileobj(source, out, CHUNK)
        # no setuid/setgid/sticky, no group/other write
        os.fchmod(out.fileno(), member.mode & 0o755 | 0o600)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def unpack(archive: str, dest: str = ".", sha256: Optional[str] = None) -> int:
    """Extract ``archive`` into ``dest`` (see the module's rules); returns the number of files
    written.  ``sha256``: the archive's digest is checked before anything is written."""
    if sha256:
        check_digest(archive, sha256)
    os.makedirs(dest, exist_ok=True)
    dest = os.path.realpath(dest)
    count = 0
    links: List[Tuple[str, str, str]] = []  # (member name, path, link target)
    with tarfile.open(archive, mode="r|gz") as tar:
        for member in tar:  # stream mode: one pass, each member read as it comes
            parts = _parts(member.name)
            if member.isdir():
                _directory(dest, parts)
            elif member.isfile():
                path = os.path.join(_directory(dest, parts[:-1]), parts[-1])
                _clear(path)
                _write(tar, member, path)
                count += 1
            elif member.issym():
                links.append((member.name, os.path.join(dest, *parts), member.linkname))
            else:
                kind = "a hard link" if member.islnk() else "not a regular file, directory or symbolic link"
                raise UnsafeArchive(f"{member.name!r} is {kind}")
    return count + _link(dest, links)


def _link(dest: str, links: List[Tuple[str, str, str]]) -> int:
    """Make the archive's symbolic links, then remove every one that resolves outside ``dest``
    (again until none does: removing one can change where a chain through it leads)."""
    made = []
    for name, path, target in links:
        if os.path.isabs(target) or not target:
            _skip(name, target)
            continue
        parent = _directory(dest, _parts(name)[:-1])
        if not _inside(os.path.normpath(os.path.join(parent, target)), dest):
            _skip(name, target)
            continue
        _clear(path)
        os.symlink(target, path)
        made.append((name, path, target))
    changed = True
    while changed:
        changed = False
        for item in list(made):
            if not _inside(os.path.realpath(item[1]), dest):
                os.unlink(item[1])
                made.remove(item)
                _skip(item[0], item[2])
                changed = True
    return len(made)


def _skip(name: str, target: str) -> None:
    print(f"cloudtrain: skipped the symbolic link {name} -> {target}: it leads outside the code directory",
          file=sys.stderr)


class FetchFailed(Exception):
    pass


def _host(url: str) -> str:
    """What a message may say about ``url``: its scheme and host, never the signed query."""
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def fetch(url: str, sha256: str, out) -> int:
    """Write the object at ``url`` to the binary file ``out`` if its sha256 is ``sha256``; its size."""
    import urllib.error
    import urllib.request
    for attempt in range(1, FETCH_ATTEMPTS + 1):
        out.seek(0)
        out.truncate()
        digest, size = hashlib.sha256(), 0
        try:
            with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as response:
                while True:
                    chunk = response.read(1 << 20)
                    if not chunk:
                        break
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
        except urllib.error.HTTPError as exc:
            if exc.code < 500 or attempt == FETCH_ATTEMPTS:
                why = " (the URL expired, or the object was removed: submit the job again)" if exc.code in (403, 404) else ""
                raise FetchFailed(f"{_host(url)} answered HTTP {exc.code} {exc.reason}{why}") from None
        except (urllib.error.URLError, OSError) as exc:
            if attempt == FETCH_ATTEMPTS:
                raise FetchFailed(f"cannot reach {_host(url)}: {getattr(exc, 'reason', exc)} (after {attempt} "
                                  "attempts); check that the pods can reach the code store") from None
        else:
            if digest.hexdigest() != sha256:
                raise FetchFailed(f"the archive from {_host(url)} has sha256 {digest.hexdigest()}, not {sha256} "
                                  "(the pod spec's); the stored object was changed: submit the job again")
            out.flush()
            return size
        time.sleep(2 ** attempt)
    raise AssertionError("unreachable")


def fetch_and_unpack(url_file: str, sha256: str, dest: str = ".") -> int:
    """Fetch the archive whose URL ``url_file`` holds, check it, unpack it into ``dest``."""
    with open(url_file, encoding="utf-8") as f:
        url = f.read().strip()
    with tempfile.NamedTemporaryFile(prefix="cloudtrain-code-", suffix=".tar.gz") as archive:
        fetch(url, sha256, archive)
        return unpack(archive.name, dest)


USAGE = ("usage: python3 -m cloudtrain.launch.unpack [--sha256 HEX] ARCHIVE [DEST]\n"
         "       python3 -m cloudtrain.launch.unpack --url-file FILE --sha256 HEX [DEST]")


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["--url-file"] and 4 <= len(args) <= 5 and args[2] == "--sha256":
        source, run = f"fetched through {args[1]}", lambda: fetch_and_unpack(args[1], args[3], *args[4:])
        dest = args[4] if len(args) > 4 else "."
    elif args[:1] == ["--sha256"] and 3 <= len(args) <= 4:
        source, run = args[2], lambda: unpack(args[2], *args[3:], sha256=args[1])
        dest = args[3] if len(args) > 3 else "."
    elif 1 <= len(args) <= 2 and not args[0].startswith("--"):
        source, run = args[0], lambda: unpack(*args)
        dest = args[1] if len(args) > 1 else "."
    else:
        print(USAGE, file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        count = run()
    except (OSError, tarfile.TarError, UnsafeArchive, FetchFailed) as exc:
        print(f"cloudtrain: cannot unpack the code archive {source}: {exc}", file=sys.stderr)
        return EXIT_JOB_FAILED
    print(f"cloudtrain: unpacked {count} code files into {os.path.abspath(dest)}", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
