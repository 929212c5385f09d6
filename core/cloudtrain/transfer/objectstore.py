"""Object stores (S3, COS, OBS, ...) behind one small interface, each through its official SDK.

A plugin registers the stores it brings with the ``cloudtrain_register_stores`` hook
(``register("cloudtrain_aws.s3store:S3Store", scheme="s3")``); the class, and its SDK, is
imported only when a store of that scheme is used.  A scheme whose plugin is not installed gets
the ``pip install`` that brings it (from the built-in table, ``cloudtrain.extend.registry``), as
fsspec's registry does.

What every cloud provider shares lives here, once:

- ``upload_once(store, url, data)``: a content-addressed upload: one existence check, a PUT only
  when the object is absent, and at most one of each per object in a process (a benchmark submits
  the same code from many threads); ``data`` is bytes or a ``shipping.Archive`` (uploaded from
  its file through the SDK's file upload: memory stays bounded whatever its size);
- ``code_url(prefix, data)``: where a code archive goes (``<prefix>/cloudtrain-code/<sha256>.tar.gz``);
- ``download(store, url, dest)``: every object under a prefix into a directory, with a progress
  line on a terminal (``cloudtrain outputs``).
"""
from __future__ import annotations

import abc
import hashlib
import sys
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Callable, ClassVar, Dict, Iterator, List, Optional, Tuple, Type, Union

from ..extend import registry
from ..spec.errors import BadInput

if TYPE_CHECKING:
    from .shipping import Archive

@dataclass(frozen=True)
class ObjectUrl:
    """``scheme://bucket/key``; ``key`` may be empty (the bucket) or a prefix."""

    scheme: str
    bucket: str
    key: str = ""

    @classmethod
    def parse(cls, url: str, what: str = "the URL") -> "ObjectUrl":
        head, sep, rest = str(url).partition("://")
        bucket, _, key = rest.partition("/")
        if not sep or not head or not bucket or any(c.isspace() for c in url):
            raise BadInput(f"{what} {url!r} is not a SCHEME://BUCKET/PREFIX URL (e.g. s3://team-data/runs/); fix it")
        return cls(head.lower(), bucket, key)

    def child(self, *parts: str) -> "ObjectUrl":
        """The URL of ``parts`` under this one (treated as a prefix)."""
        key = "/".join(p.strip("/") for p in (self.key, *parts) if p.strip("/"))
        return ObjectUrl(self.scheme, self.bucket, key)

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.key}"


Progress = Callable[[int], None]  # called with the bytes moved since the last call


class ObjectStore(abc.ABC):
    """One object store, reached through its SDK.  A plugin implements these four (plus
    ``presign`` where the store can make a time-limited URL); the SDK is imported inside them.
    Constructors take keyword arguments ``client`` (an SDK client: tests, a provider's own),
    ``region`` and ``endpoint`` (an S3-compatible or private endpoint), all optional."""

    scheme: ClassVar[str] = ""
    # The SDK modules the store imports when used; ``usable_store_class`` checks that they are
    # installed without importing them (validate and render import no SDK).
    sdk_modules: ClassVar[Tuple[str, ...]] = ()

    @property
    def where(self) -> str:
        """The endpoint or region the store talks to (part of ``upload_once``'s memory)."""
        return ""

    @abc.abstractmethod
    def exists(self, url: ObjectUrl) -> bool:
        """Whether the object ``url`` exists."""

    @abc.abstractmethod
    def put(self, url: ObjectUrl, data: bytes, content_type: str = "application/octet-stream") -> None:
        """Write ``data`` to the object ``url``."""

    def put_file(self, url: ObjectUrl, path: Path, content_type: str = "application/octet-stream") -> None:
        """Write the file ``path`` to the object ``url``, streamed from the file.  A store whose SDK
        cannot stream gets this fallback, which reads the file whole: override it."""
        self.put(url, Path(path).read_bytes(), content_type)

    @abc.abstractmethod
    def objects(self, url: ObjectUrl) -> Iterator[Tuple[ObjectUrl, int]]:
        """(object, size) of every object under the prefix ``url`` (or the one object it names)."""

    @abc.abstractmethod
    def fetch(self, url: ObjectUrl, dest: Path, progress: Optional[Progress] = None) -> None:
        """Download the object ``url`` to the file ``dest``; ``progress(n)`` as bytes arrive."""

    def presign(self, url: ObjectUrl, seconds: int) -> str:
        """A URL that reads the object with a plain HTTP GET for ``seconds``."""
        raise BadInput(f"a {self.scheme}:// store cannot make a time-limited URL; use another code_store")


# -- lookup (the table lives in cloudtrain.extend.registry) ------------------------------------------
def stores() -> Dict[str, Tuple[str, str]]:
    """Every registered store: scheme -> (its class as ``module:Class``, the plugin)."""
    from ..extend.plugins import tables
    return {e.name: (e.target, e.plugin) for e in tables()[registry.STORE].entries()}


def store_class(scheme: str) -> Type["ObjectStore"]:
    """The store class for ``scheme``; bad input with the install command when none is registered."""
    from ..extend.plugins import tables
    entry = tables()[registry.STORE].get(scheme.lower())
    if entry is None:
        known = ", ".join(f"{s}://" for s in tables()[registry.STORE]) or "none"
        fix = registry.install_hint(registry.STORE, scheme.lower()) or "install the plugin that brings it"
        raise BadInput(f"no installed plugin reads {scheme}:// object stores (installed: {known}); {fix}")
    return entry.load()


def usable_store_class(scheme: str) -> Type["ObjectStore"]:
    """``store_class(scheme)`` whose SDK is installed too (checked offline, nothing imported);
    bad input with the ``pip install`` that brings the SDK otherwise."""
    from ..extend.plugins import module_installed, tables
    cls = store_class(scheme)
    missing = [module for module in cls.sdk_modules if not module_installed(module)]
    if missing:
        entry = tables()[registry.STORE].get(scheme.lower())
        assert entry is not None  # store_class(scheme) found it
        fix = (entry.install_hint or registry.install_hint(registry.STORE, scheme.lower())
               or f"install the SDK of the plugin {entry.plugin}")
        raise BadInput(f"{scheme}:// object stores are reached through {missing[0]}, which is not installed; {fix}")
    return cls


def open_store(url: ObjectUrl, **settings) -> ObjectStore:
    """A store for ``url``'s scheme; ``settings`` go to its constructor (``client``, ``region``,
    ``endpoint``: see ``ObjectStore``)."""
    return store_class(url.scheme)(**settings)


# -- what providers share -----------------------------------------------------------------------
CODE_FOLDER = "cloudtrain-code"

_lock = threading.Lock()
_sent: set = set()
_keys: Dict[tuple, threading.Lock] = {}


Payload = Union[bytes, "Archive"]


def sha256_of(data: Payload) -> str:
    """The sha256 of the bytes, or the one an ``Archive`` carries (computed as it was packed)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return hashlib.sha256(data).hexdigest()
    return data.sha256


def code_url(prefix: ObjectUrl, data: Payload) -> ObjectUrl:
    """Where an archive goes under ``prefix``: named by its sha256, so the same code has one object."""
    return prefix.child(CODE_FOLDER, sha256_of(data) + ".tar.gz")


def upload_once(store: ObjectStore, url: ObjectUrl, data: Payload, content_type: str = "application/gzip") -> bool:
    """Put ``data`` (bytes, or a ``shipping.Archive``: from its file) at ``url`` unless it is there
    already; True when it was sent.  ``url`` must be content-addressed (``code_url``): an existing
    object is taken to hold the same bytes."""
    key = (type(store).__name__, store.where, str(url))
    with _lock:
        key_lock = _keys.setdefault(key, threading.Lock())
    with key_lock:  # concurrent submits of the same code upload it once
        if key in _sent:
            return False
        sent = not store.exists(url)
        if sent:
            if isinstance(data, (bytes, bytearray, memoryview)):
                store.put(url, bytes(data), content_type)
            else:
                store.put_file(url, data.path, content_type)
        _sent.add(key)
        return sent


def forget_uploads() -> None:
    """Forget which objects this process sent (a test or benchmark that starts a fresh store)."""
    with _lock:
        _sent.clear()


def relative_key(prefix: ObjectUrl, obj: ObjectUrl) -> PurePosixPath:
    """``obj``'s path under ``prefix`` (the object's own name when ``prefix`` names it); refuses
    absolute and ``..`` paths, which would write outside the destination."""
    base = prefix.key.rstrip("/")
    rel = obj.key[len(base):].lstrip("/") if base and obj.key.startswith(base) else obj.key
    rel = rel or PurePosixPath(obj.key).name
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not rel:
        raise BadInput(f"{obj} has a name that would land outside the destination; fetch it by hand")
    return path


class _ProgressLine:
    """``downloading 12.0/80.5 MB`` on a terminal, redrawn in place; nothing otherwise."""

    def __init__(self, total: int, stream=None):
        self.total, self.done = total, 0
        self.stream = stream or sys.stderr
        self.on = self.stream.isatty() and total >= 4 << 20

    def __call__(self, n: int) -> None:
        self.done += n
        if self.on:
            self.stream.write(f"\rdownloading {self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB")
            self.stream.flush()

    def close(self) -> None:
        if self.on:
            self.stream.write("\n")


def download(store: ObjectStore, url: ObjectUrl, dest: Path, stream=None) -> List[Path]:
    """Every object under ``url`` into ``dest`` (paths below the prefix kept); the files written."""
    found = list(store.objects(url))
    if not found:
        raise BadInput(f"nothing is stored under {url} (the job wrote nothing to CLOUDTRAIN_OUTPUT_DIR yet, "
                       "or it has not ended); wait for the job and try again")
    progress = _ProgressLine(sum(size for _, size in found), stream)
    written = []
    try:
        for obj, _ in found:
            if obj.key.endswith("/"):
                continue  # a folder marker some consoles create
            target = Path(dest).joinpath(*relative_key(url, obj).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            store.fetch(obj, target, progress)
            written.append(target)
    finally:
        progress.close()
    return written
