"""A platform's node side, registered once: ``Platform`` and the registry of installed ones.

Standard library only (Python >= 3.8): ``cloudtrain launch`` imports this inside the training
image.  A plugin lists its platforms in ``PLATFORMS`` of its package's ``detect`` module
(``cloudtrain_tione.detect``), next to the detectors; that is the one place a platform is
named.  The launcher finds them through the plugin's one entry point (group ``cloudtrain``),
a provider through its own package, a shipped launcher bundle through ``CLOUDTRAIN_DETECTORS``.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .topology import Topology

ENTRY_POINT_GROUP = "cloudtrain"
GENERIC = "local"
Target = Union[str, Callable]


class PlatformError(Exception):
    """A platform that cannot be found or loaded."""


@dataclass(frozen=True)
class Cluster:
    """Addresses of an emulated job's nodes, as the local and Docker providers assign them."""

    hosts: List[str]
    master_port: int = 29500
    output_dir: Optional[str] = None


def import_target(target: Target, default_attr: str = ""):
    """``"module:attr"`` imported now (``"module"`` alone: ``default_attr`` of it, or the module),
    or the object itself.  cloudtrain's one loader of such strings: core's registry uses it too.
    ImportError and AttributeError propagate."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    loaded = importlib.import_module(module)
    attr = attr or default_attr
    return getattr(loaded, attr) if attr else loaded


def load(target: Target):
    """A detector (``"module:function"``, default function ``detect``), or the object itself."""
    try:
        return import_target(target, "detect")
    except (ImportError, AttributeError) as exc:
        raise PlatformError("cannot load detector %r: %s" % (target, exc))


def target_of(fn: Target) -> str:
    return fn if isinstance(fn, str) else "%s:%s" % (fn.__module__, fn.__name__)


class Platform:
    """What the nodes of one platform see.

    - ``detect(environ) -> Topology | None``: this node's topology, or None when the
      environment is not this platform's;
    - ``environment(job, node_index, cluster)``: the inverse, the variables the platform
      injects into node ``node_index`` (used by the local and Docker providers to emulate it);
    - ``priority``: auto-detection tries the highest first (the most specific platforms, whose
      variables look like others'); ``None``: never auto-detected, only when named
      (``--platform``, ``CLOUDTRAIN_DETECTORS``), for a platform that looks exactly like
      another one (EKS's pods are Kubeflow's);
    - ``prefixes`` / ``variables``: the environment variables that belong to the platform
      (removed from the submitting shell's environment before emulated nodes start);
    - ``ships``: modules a launcher bundle needs besides the detector's (what it imports).

    ``detect`` and ``environment`` are callables or ``"module:function"`` strings imported on
    first use (an ``environment`` may need the provider's option model: keep it out of this
    stdlib-only module's imports).
    """

    def __init__(self, name: str, detect: Target, *, priority: Optional[int] = 0,
                 environment: Optional[Target] = None, prefixes: Sequence[str] = (),
                 variables: Sequence[str] = (), ships: Sequence[str] = ()):
        self.name, self.priority = name, priority
        self._detect, self._environment = detect, environment
        self.prefixes, self.variables, self.ships = tuple(prefixes), frozenset(variables), tuple(ships)

    @property
    def target(self) -> str:
        """``module:function`` of the detector (what ``CLOUDTRAIN_DETECTORS`` records)."""
        return target_of(self._detect)

    @property
    def modules(self) -> Tuple[str, ...]:
        """The modules a launcher bundle carries for this platform."""
        return (self.target.partition(":")[0],) + self.ships

    @property
    def bundle_targets(self) -> Tuple[str, ...]:
        """What a launcher bundle is written from: the modules it ships, then the detector."""
        return self.ships + (self.target,)

    def detect(self, environ: Mapping[str, str]) -> Optional[Topology]:
        return load(self._detect)(environ)

    def environment(self, job, node_index: int, cluster: Cluster) -> Dict[str, str]:
        if self._environment is None:
            raise PlatformError("platform %r cannot be emulated (it has no environment)" % self.name)
        return load(self._environment)(job, node_index, cluster)

    def owns(self, variable: str) -> bool:
        return variable in self.variables or variable.startswith(self.prefixes)

    def __repr__(self) -> str:
        return "<Platform %s>" % self.name


@functools.lru_cache(maxsize=None)
def generic() -> Platform:
    """The generic platform (``local``), made once from ``cloudtrain.launch.generic``, which
    imports nothing of this module."""
    from . import generic as module
    return Platform(GENERIC, module.detect, priority=0, environment=module.environment,
                    prefixes=module.PREFIXES, variables=module.VARIABLES)


def platforms_of(module: str) -> List[Platform]:
    """The platforms of the plugin that ``module`` belongs to: ``<package>.detect.PLATFORMS``."""
    package = module.partition(":")[0].split(".")[0]
    try:
        detect = importlib.import_module(package + ".detect")
    except ImportError as exc:
        if getattr(exc, "name", None) == package + ".detect":
            return []  # a plugin without a node side (it runs nothing on nodes of its own)
        raise PlatformError("cannot load the platforms of %s: %s" % (package, exc))
    return list(getattr(detect, "PLATFORMS", ()))


@functools.lru_cache(maxsize=None)
def installed_entry_points() -> Tuple[Tuple[str, str], ...]:
    """``(name, value)`` of every installed entry point of the ``cloudtrain`` group, read once per
    process (the plugin manager and the node platforms both need them).  Empty when the metadata
    cannot be read (a broken distribution must not stop a training node)."""
    return tuple((name, value) for _dist, name, value in group_entry_points())


@functools.lru_cache(maxsize=None)
def group_entry_points() -> Tuple[Tuple[str, str, str], ...]:
    """``(distribution, name, value)`` of every installed entry point of the ``cloudtrain`` group,
    in ``importlib.metadata``'s order (``sys.path``'s, then each directory's), one distribution
    of a name (the first found; ``distribution`` is its normalized name).

    ``importlib.metadata.entry_points()`` parses every installed distribution's metadata (~10 ms
    among 180, ~1/8 of a command's start); the same is read here straight from the
    ``*.dist-info/entry_points.txt`` files of the ``sys.path`` directories.  Where that would not
    see everything ``importlib.metadata`` does (a zip or egg on ``sys.path``, a meta path finder
    that finds distributions of its own), ``importlib.metadata`` is asked instead."""
    import sys
    try:
        found = _scan_entry_points(sys.path, sys.meta_path)
        if found is not None:
            return found
        from importlib import metadata
        out = []
        seen = set()
        for dist in metadata.distributions():
            key = _normalized(dist.metadata["Name"] or "")
            if key in seen:
                continue
            seen.add(key)
            out += [(key, ep.name, ep.value) for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
        return tuple(out)
    except Exception:
        return ()


def _normalized(name: str) -> str:
    """A distribution's name as ``importlib.metadata`` compares them (PEP 503, ``_`` for ``-``)."""
    import re
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _scan_entry_points(path: Sequence[str], meta_path: Sequence[object]) -> Optional[Tuple[Tuple[str, str, str], ...]]:
    """The ``cloudtrain`` group read from the dist-info/egg-info directories of the directories
    on ``path``, or None where ``importlib.metadata`` could find distributions this does not."""
    import os
    from importlib.machinery import PathFinder
    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in meta_path):
        return None
    out = []
    seen = set()
    for entry in path:
        directory = entry or "."
        if not os.path.isdir(directory):
            if os.path.exists(directory):
                return None  # a zip file
            continue
        try:
            children = os.listdir(directory)
        except OSError:
            continue
        for child in children:
            low = child.lower()
            if low.endswith(".egg"):
                return None
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            key = _normalized(low.rpartition(".")[0].partition("-")[0])
            if key in seen:
                continue
            seen.add(key)
            try:
                with open(os.path.join(directory, child, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            out += [(key, name, value) for name, value in _section(text, ENTRY_POINT_GROUP)]
    return tuple(out)


def _section(text: str, group: str) -> List[Tuple[str, str]]:
    """``(name, value)`` of section ``[group]`` of an ``entry_points.txt``, parsed as
    ``importlib.metadata`` does (lines stripped; blank lines and ``#`` comments skipped); a line
    without ``=``, which makes ``importlib.metadata`` fail, is skipped."""
    pairs = []
    section = None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group and "=" in line:
            name, _, value = line.partition("=")
            pairs.append((name.strip(), value.strip()))
    return pairs


def _entry_point_modules() -> List[str]:
    return [value for _name, value in installed_entry_points()]


def installed(environ: Optional[Mapping[str, str]] = None) -> List[Platform]:
    """Every installed platform, most specific first (by priority; the generic one last).

    From the ``cloudtrain`` entry points and ``$CLOUDTRAIN_PLUGINS`` of ``environ`` and of this
    process (installed means loadable here, as the entry points are: a node's variables checked
    from a process that loads a plugin under development see its platforms); a plugin whose
    platforms cannot be loaded is skipped (a broken third-party plugin must not stop a node).
    Two plugins that name the same platform with different detectors: the first found is used
    and the clash is said on stderr, once per process (a node must not stop for it either)."""
    import os
    named = (environ or {}).get("CLOUDTRAIN_PLUGINS", "") + "," + os.environ.get("CLOUDTRAIN_PLUGINS", "")
    modules = _entry_point_modules() + [m.strip() for m in named.split(",") if m.strip()]
    seen: Dict[str, Platform] = {}
    for module in modules:
        try:
            found = platforms_of(module)
        except PlatformError:
            continue
        for platform in found:
            first = seen.setdefault(platform.name, platform)
            if first.target != platform.target:
                _say_clash(platform.name, first.target, platform.target)
    return ordered(seen.values())


_CLASHES_SAID: set = set()


def _say_clash(name: str, used: str, ignored: str) -> None:
    if (name, ignored) in _CLASHES_SAID:
        return
    _CLASHES_SAID.add((name, ignored))
    import sys
    sys.stderr.write("cloudtrain launch: warning: two plugins name the platform %r: %s is used, %s is ignored; "
                     "uninstall one, or rename its platform\n" % (name, used, ignored))


def ordered(platforms) -> List[Platform]:
    """By priority, highest first, ties by name; the generic platform last."""
    specific = [p for p in platforms if p.name != GENERIC]
    specific.sort(key=lambda p: (-(p.priority if p.priority is not None else -1), p.name))
    return specific + [generic()]


def find(name: str, near: Optional[str] = None) -> Platform:
    """Platform ``name``: from the plugin of module ``near`` (a provider's), else installed."""
    if name == GENERIC:
        return generic()
    for platform in (platforms_of(near) if near else []):
        if platform.name == name:
            return platform
    for platform in installed():
        if platform.name == name:
            return platform
    raise PlatformError("no platform %r: neither %s's detect.PLATFORMS nor an installed plugin names it"
                        % (name, (near or "?").split(".")[0]))
