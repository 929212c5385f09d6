"""Unpack the job's code archive into the working directory of a node (standard library only).

``python3 -m cloudtrain.launch.unpack ARCHIVE [DEST]`` extracts ``cloudtrain.shipping.archive``'s
gzip'd tar (a Kubernetes pod reads it from the ConfigMap its provider created) into ``DEST``
(default: the current directory) before the node's command starts.  Only regular files and
directories under ``DEST`` are written: an absolute path, a ``..`` or a link in the archive is
refused (Python 3.8's ``tarfile`` has no extraction filter, so the members are checked here).

``python3 -m cloudtrain.launch.unpack --url-file FILE --sha256 HEX [DEST]``: the archive is in an
object store; ``FILE`` (a mounted Secret) holds a time-limited GET URL for it.  It is fetched
with ``urllib`` (a dropped connection or a 5xx is tried again), its sha256 must be ``HEX`` (the
digest the pod spec names), then it is unpacked as above.  The URL is never printed: it grants
access until it expires; messages name the host only.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tarfile
import tempfile
import time
from typing import List, Optional

from ..exitcodes import EXIT_BAD_INPUT, EXIT_JOB_FAILED, EXIT_OK

FETCH_ATTEMPTS = 4
FETCH_TIMEOUT = 60.0  # seconds without a byte before an attempt is given up


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


USAGE = ("usage: python3 -m cloudtrain.launch.unpack ARCHIVE [DEST]\n"
         "       python3 -m cloudtrain.launch.unpack --url-file FILE --sha256 HEX [DEST]")


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    stored = args[:1] == ["--url-file"]
    if stored and len(args) >= 4 and args[2] == "--sha256" and len(args) <= 5:
        source, run = f"fetched through {args[1]}", lambda: fetch_and_unpack(args[1], args[3], *args[4:])
        dest = args[4] if len(args) > 4 else "."
    elif not stored and 1 <= len(args) <= 2:
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
