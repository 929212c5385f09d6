"""Which platform is this node on?  A registry of stdlib-only detectors.

A detector is ``detect(environ) -> Topology | None``.  They come from, in order:

1. ``$CLOUDTRAIN_DETECTORS`` -- ``name=module:function`` items separated by commas (what the
   local and Docker providers set when they emulate a platform, and what a shipped launcher
   bundle records);
2. the ``cloudtrain.detectors`` entry-point group of installed distributions;
3. the generic detector (``local``: ``CLOUDTRAIN_*`` or torchrun's ``PET_*`` variables) last,
   because every platform also sets variables that look generic.
"""
from __future__ import annotations

import importlib
import os
from typing import Callable, List, Mapping, Optional, Tuple

from .topology import Topology

Detector = Callable[[Mapping[str, str]], Optional[Topology]]
GENERIC = "local"
ENTRY_POINT_GROUP = "cloudtrain.detectors"


class DetectionError(Exception):
    pass


def _load(target: str) -> Detector:
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr or "detect")
    except (ImportError, AttributeError) as exc:
        raise DetectionError("cannot load detector %r: %s" % (target, exc))


def _entry_points() -> List[Tuple[str, str]]:
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return []
    try:
        eps = metadata.entry_points()
        group = eps.select(group=ENTRY_POINT_GROUP) if hasattr(eps, "select") else eps.get(ENTRY_POINT_GROUP, [])
    except Exception:  # a broken distribution must not stop a training node
        return []
    return [(ep.name, ep.value) for ep in group]


def registered(environ: Optional[Mapping[str, str]] = None, entry_points: bool = True) -> List[Tuple[str, str]]:
    """(name, "module:function") pairs, most specific first, generic last, no duplicates."""
    environ = os.environ if environ is None else environ
    pairs = []
    for item in environ.get("CLOUDTRAIN_DETECTORS", "").split(","):
        name, sep, target = item.strip().partition("=")
        if sep and name and target:
            pairs.append((name, target))
    if entry_points:
        pairs.extend(_entry_points())
    if not any(name == GENERIC for name, _ in pairs):
        pairs.append((GENERIC, "cloudtrain_local.detect:detect"))
    seen, ordered = set(), []
    for name, target in pairs:
        if name not in seen:
            seen.add(name)
            ordered.append((name, target))
    return [p for p in ordered if p[0] != GENERIC] + [p for p in ordered if p[0] == GENERIC]


def detect(environ: Mapping[str, str], platform: Optional[str] = None) -> Topology:
    """Resolve this node's topology; ``platform`` forces one detector."""
    # CLOUDTRAIN_NUM_NODES is only ever set by cloudtrain (a provider's generic environment, or
    # an outer `cloudtrain launch`), never by a platform: skip scanning every installed
    # distribution's entry points (~50 ms per node) and go to CLOUDTRAIN_DETECTORS, then generic.
    pairs = registered(environ, entry_points=bool(platform) or "CLOUDTRAIN_NUM_NODES" not in environ)
    if platform:
        targets = dict(pairs)
        if platform not in targets:
            raise DetectionError(
                "unknown platform %r; known: %s. Install its plugin or set CLOUDTRAIN_DETECTORS"
                % (platform, ", ".join(sorted(targets))))
        topo = _load(targets[platform])(environ)
        if topo is None:
            raise DetectionError(
                "this node's environment does not look like %r; check the variables the "
                "platform injects, or drop --platform to auto-detect" % platform)
        return topo
    for name, target in pairs:
        try:
            fn = _load(target)
        except DetectionError:
            if name == GENERIC:
                raise  # without it the node would silently run alone
            continue  # a broken third-party detector must not stop the node
        topo = fn(environ)
        if topo is not None:
            return topo
    return Topology(platform="standalone")
