"""Which platform is this node on?  The detectors of the registered ``Platform``s, in order:

1. ``$CLOUDTRAIN_DETECTORS`` -- ``name=module:function`` items separated by commas (what a
   provider's request sets for its nodes, what the local and Docker providers set when they
   emulate a platform, and what a shipped launcher bundle records), in the order given;
2. the installed plugins' platforms (``PLATFORMS`` of each plugin's ``detect`` module, found
   through its ``cloudtrain`` entry point), by priority, most specific first;
3. the generic platform (``local``: ``CLOUDTRAIN_*``, torchrun's ``PET_*`` or plain PyTorch
   variables) last, because every platform also sets variables that look generic.
"""
from __future__ import annotations

import os
from typing import List, Mapping, Optional, Tuple

from . import platform as registry
from .platform import GENERIC, Platform, PlatformError
from .topology import Topology

DetectionError = PlatformError


def _named(environ: Mapping[str, str]) -> List[Platform]:
    out = []
    for item in environ.get("CLOUDTRAIN_DETECTORS", "").split(","):
        name, sep, target = item.strip().partition("=")
        if sep and name and target:
            out.append(Platform(name, target, priority=None))
    return out


def platforms(environ: Optional[Mapping[str, str]] = None, installed: bool = True,
              named: bool = True) -> List[Platform]:
    """The platforms to try, in order, each name once (at its first place), generic last.
    ``named``: also those only tried when named (``priority=None``), for ``--platform``."""
    environ = os.environ if environ is None else environ
    found = _named(environ)
    if installed:
        found += [p for p in registry.installed(environ) if named or p.priority is not None]
    else:
        found.append(registry.generic())
    seen, out = set(), []
    for p in found:
        if p.name not in seen:
            seen.add(p.name)
            out.append(p)
    return [p for p in out if p.name != GENERIC] + [p for p in out if p.name == GENERIC]


def registered(environ: Optional[Mapping[str, str]] = None, entry_points: bool = True) -> List[Tuple[str, str]]:
    """(name, "module:function") of the platforms auto-detection tries, in order."""
    return [(p.name, p.target) for p in platforms(environ, installed=entry_points, named=False)]


def detect(environ: Mapping[str, str], platform: Optional[str] = None) -> Topology:
    """Resolve this node's topology; ``platform`` forces one platform's detector."""
    # CLOUDTRAIN_NUM_NODES is only ever set by cloudtrain (a provider's generic environment, or
    # an outer `cloudtrain launch`), never by a platform: skip scanning every installed
    # distribution's entry points (~50 ms per node) and go to CLOUDTRAIN_DETECTORS, then generic.
    candidates = platforms(environ, installed=bool(platform) or "CLOUDTRAIN_NUM_NODES" not in environ,
                           named=bool(platform))
    if platform:
        chosen = next((p for p in candidates if p.name == platform), None)
        if chosen is None:
            raise DetectionError(
                "unknown platform %r; known: %s. Install its plugin or set CLOUDTRAIN_DETECTORS"
                % (platform, ", ".join(sorted(p.name for p in candidates))))
        topo = chosen.detect(environ)
        if topo is None:
            raise DetectionError(
                "this node's environment does not look like %r; check the variables the "
                "platform injects, or drop --platform to auto-detect" % platform)
        return topo
    for candidate in candidates:
        try:
            topo = candidate.detect(environ)
        except PlatformError:
            if candidate.name == GENERIC:
                raise  # without it the node would silently run alone
            continue  # a broken third-party detector must not stop the node
        if topo is not None:
            return topo
    return Topology(platform="standalone")
