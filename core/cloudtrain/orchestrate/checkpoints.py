"""The checkpoint carried between providers when a recovery moves along ``-p a,b,c``.

Each candidate keeps its checkpoints where its job's ``storage.checkpoint`` says (``s3://`` on
SageMaker and ec2, ``azureml://`` on Azure ML, ``cos://`` on TI-ONE, ``obs://`` on ModelArts).
When the controller sends the next attempt to another provider (after a ``capacity`` or
``preemption``), it first copies what the last provider's store holds under that prefix (the
checkpoint directory as the last attempt left it: the latest checkpoint and whatever the script
keeps beside it) to the next provider's, through the stores the plugins bring
(``cloudtrain.transfer.objectstore``): each object is fetched to a private temporary file (the
SDKs stream it: memory stays bounded whatever its size), its sha256 computed from that file in
1 MiB chunks, put to the next store from the file, then fetched back and its sha256 compared.  A
mismatch, or a store error, stops the move (``CheckpointNotCarried``): the next attempt does not
start without the checkpoint the last one left.

``problems(candidates)`` says, before anything is sent, where a checkpoint could not travel and
why (``validate`` prints it): a local path, a Kubernetes claim, a store no installed plugin reads,
a provider that keeps no checkpoint.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from ..spec.errors import CloudtrainError, PlatformError
from ..transfer.objectstore import ObjectStore, ObjectUrl, relative_key

CHUNK = 1 << 20  # bytes read at a time while hashing


class CheckpointNotCarried(PlatformError):
    """The checkpoint could not be copied to the next provider's store (or arrived changed)."""


@dataclass
class Carried:
    """What one move copied: each object's path below the prefix, its size and sha256."""

    source: str
    target: str
    files: List[Tuple[str, int, str]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(size for _, size, _ in self.files)

    def __str__(self) -> str:
        if not self.files:
            return f"no checkpoint under {self.source} yet: nothing to carry to {self.target}"
        return (f"checkpoint carried from {self.source} to {self.target}: {len(self.files)} file(s), "
                f"{self.size} bytes, sha256 checked")


def location(job) -> Optional[str]:
    """Where ``job`` keeps its checkpoints (``storage.checkpoint``), None when it keeps none."""
    return job.storage.checkpoint


def _why_not(provider: str, uri: Optional[str]) -> Optional[str]:
    """Why a checkpoint kept at ``uri`` by ``provider`` cannot be read or written from here."""
    from ..transfer import storage
    from ..transfer.objectstore import usable_store_class
    if uri is None:
        return f"{provider} keeps no checkpoint (its storage.checkpoint is not set)"
    scheme = storage.scheme(uri)
    if scheme == "file":
        return (f"{provider}'s checkpoint is a path on a machine ({uri}): it stays on the machine that ran the job; "
                "give an object store URI to carry it")
    if scheme == "pvc":
        return (f"{provider}'s checkpoint is a Kubernetes claim ({uri}): it is mounted in the cluster, "
                "not reachable here")
    try:
        usable_store_class(scheme)
    except CloudtrainError as exc:
        return f"{provider}'s checkpoint {uri} cannot be read from here: {exc}"
    return None


def problems(candidates: Sequence[Tuple[str, Any]]) -> List[str]:
    """For ``candidates`` (``(provider, job)`` in failover order), why a checkpoint could not go
    from each to the next one (a recovery after ``capacity`` or ``preemption`` moves that way);
    nothing when none keeps a checkpoint or there is no next one."""
    out: List[str] = []
    for (here, here_job), (there, there_job) in zip(candidates, candidates[1:]):
        source, target = location(here_job), location(there_job)
        if source is None and target is None:
            continue
        if source == target:
            continue  # the same store: the next attempt sees it as it is
        why = _why_not(here, source) or _why_not(there, target)
        if why is not None:
            out.append(f"a checkpoint cannot travel from {here} to {there}: {why}; an attempt moved to {there} "
                       "starts from the beginning")
    return out


def store_for(provider, url: ObjectUrl, job) -> ObjectStore:
    """The store ``provider`` reaches ``url`` through, with its own clients and account
    (``Provider.checkpoint_store``), or the registered store of the URL's scheme."""
    own = getattr(provider, "checkpoint_store", None)
    if own is not None:
        return own(url, job)
    from ..transfer.objectstore import open_store
    return open_store(url)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def carry(source_store: ObjectStore, source: ObjectUrl, target_store: ObjectStore, target: ObjectUrl) -> Carried:
    """Copy every object under ``source`` to the same path under ``target`` (see the module):
    one object at a time through a private temporary file, checked by sha256 after it arrived."""
    done = Carried(str(source), str(target))
    with tempfile.TemporaryDirectory(prefix="cloudtrain-checkpoint-") as tmp:  # 0700, this user's
        for obj, size in list(source_store.objects(source)):
            if obj.key.endswith("/"):
                continue  # a folder marker some consoles create
            rel = relative_key(source, obj)
            there = target.child(*rel.parts)
            got, back = Path(tmp) / "object", Path(tmp) / "check"
            try:
                source_store.fetch(obj, got)
                digest, length = sha256_file(got), got.stat().st_size
                if length != size:
                    raise CheckpointNotCarried(f"{obj} is {size} bytes in its listing, {length} fetched")
                target_store.put_file(there, got)
                target_store.fetch(there, back)
                arrived = sha256_file(back)
                if arrived != digest:
                    raise CheckpointNotCarried(f"{there} arrived with sha256 {arrived}, {obj} has {digest}")
            finally:
                for path in (got, back):
                    if path.exists():
                        os.unlink(path)
            done.files.append((rel.as_posix(), length, digest))
    return done
