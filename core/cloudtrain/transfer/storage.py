"""Neutral storage: where the training data is (``storage.inputs``) and where outputs go
(``storage.output``).

Every node sees ``CLOUDTRAIN_INPUT_<NAME>`` (a local path holding input ``name``) and
``CLOUDTRAIN_OUTPUT_DIR``; each provider maps the URIs natively where its platform can and
declares the schemes it takes (``Provider.storage_schemes``).  A scheme a provider cannot take is
bad input at its line, naming the schemes it does take (``problems``).  ``file`` stands for a
host path or a ``file://`` URI (local and docker).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

if TYPE_CHECKING:
    from ..spec.job import JobSpec

INPUT_ENV_PREFIX = "CLOUDTRAIN_INPUT_"
OUTPUT_ENV = "CLOUDTRAIN_OUTPUT_DIR"


def scheme(uri: str) -> str:
    """``s3``, ``pvc``, ``cos``, ... of ``uri``; ``file`` for a ``file://`` URI or a plain path."""
    head, sep, _ = uri.partition("://")
    return head.lower() if sep else "file"


def split(uri: str) -> Tuple[str, str]:
    """``(scheme, rest)``: ``pvc://claim/sub/dir`` -> ``("pvc", "claim/sub/dir")``."""
    head, sep, rest = uri.partition("://")
    return (head.lower(), rest) if sep else ("file", uri)


def input_env(name: str) -> str:
    """The variable a node reads input ``name`` from: ``CLOUDTRAIN_INPUT_TRAIN`` for ``train``."""
    return INPUT_ENV_PREFIX + name.upper()


def entries(job: JobSpec) -> Iterator[Tuple[tuple, str]]:
    """``(location in the job file, URI)`` of every input and the output."""
    for name, uri in sorted(job.storage.inputs.items()):
        yield ("storage", "inputs", name), uri
    if job.storage.output:
        yield ("storage", "output"), job.storage.output


def local_path(job: JobSpec, uri: str) -> Path:
    """A ``file://`` URI or a path as an absolute path (relative: to the job file's directory)."""
    _, rest = split(uri)
    path = Path(rest).expanduser()
    if not path.is_absolute():
        base = job.source.path.parent if job.source is not None and job.source.path is not None else Path.cwd()
        path = base / path
    return path.resolve()


def problems(job: JobSpec, provider: str, schemes: Tuple[str, ...],
             output_schemes: Optional[Tuple[str, ...]] = None) -> List[Tuple[tuple, str]]:
    """``(location, message)`` for every input/output whose scheme ``provider`` does not take;
    ``output_schemes``: those ``storage.output`` takes, when they differ from the inputs'."""
    out = []
    for loc, uri in entries(job):
        if loc == ("storage", "output") and output_schemes is not None:
            schemes = output_schemes
        if scheme(uri) in schemes:
            continue
        if schemes:
            takes = ", ".join(("a host path or file://" if s == "file" else f"{s}://") for s in schemes)
            out.append((loc, f"{provider} cannot take {uri!r} (scheme {scheme(uri)}); "
                             f"it takes {takes}: give one of those"))
        else:
            out.append((loc, f"{provider} takes no storage.inputs or storage.output yet; remove them or use a provider "
                             "that maps them (the storage table in docs/job-file.md)"))
    return out


def path_in(uri: str) -> Optional[str]:
    """The path after a ``pvc://claim`` (``None`` when the URI names the claim only)."""
    _, rest = split(uri)
    _, _, sub = rest.partition("/")
    return sub.strip("/") or None
