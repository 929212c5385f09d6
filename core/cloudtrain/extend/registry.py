"""One registry of what plugins bring, in fsspec's style: a table per kind of ``"module:attr"``
strings, each with the plugin that registered it and the extra that provides it.

Kinds (``KINDS``) and the hook that fills each:

- ``provider``: ``cloudtrain_register_providers`` (``register("pkg.mod:Class", name="x")``);
- ``store``: ``cloudtrain_register_stores`` (``register("pkg.mod:Class", scheme="s3")``);
- ``catalog``: ``cloudtrain_register_catalogs`` (``register("pkg.mod:refresh", provider="x")``):
  a catalog refresher kept outside the provider class.

Node platforms are not a table here: the launcher (standard library only) finds them in each
plugin's ``detect.PLATFORMS`` (``cloudtrain.launch.platform``), through the same entry points.

Lookups are lazy: a table holds strings, and ``Entry.load`` imports the module the first time
an entry is used (with the launcher's loader, ``cloudtrain.launch.platform.import_target``, the
one loader of ``"module:attr"`` strings in cloudtrain).  A second registration of a name with
another target is an error naming both plugins, never a silent win.

What is built in is what the ``cloudtrain`` distribution's own entry points name (group
``cloudtrain``); the name of each entry point is the extra that carries its plugin's SDKs
(``aws = "cloudtrain_aws.plugin"`` and ``cloudtrain[aws]``).  ``builtin()`` reads those plugins'
hooks directly (no plugin manager, disabled plugins too): the built-in lists
(``builtin_providers()``: job files' ``providers:`` sections, the contract tests) and the install
hints all come from it.  A new built-in provider is its folder, its entry point, its extra (and
its docs page): nothing else.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from ..spec.errors import BadInput
from ..launch.platform import group_entry_points, import_target

ENTRY_POINT_GROUP = "cloudtrain"
DISTRIBUTION = "cloudtrain"

PROVIDER, STORE, CATALOG = "provider", "store", "catalog"
KINDS: Tuple[str, ...] = (PROVIDER, STORE, CATALOG)
# kind -> (the hook that registers it, the keyword that names an entry in ``register``)
HOOKS: Dict[str, Tuple[str, str]] = {
    PROVIDER: ("cloudtrain_register_providers", "name"),
    STORE: ("cloudtrain_register_stores", "scheme"),
    CATALOG: ("cloudtrain_register_catalogs", "provider"),
}


class DuplicateRegistration(BadInput):
    """Two plugins registered one name of one kind with different targets."""


@dataclass(frozen=True)
class Entry:
    """One registration: ``target`` is ``"module:attr"`` (imported by ``load``) or the object."""

    kind: str
    name: str
    target: Any
    plugin: str
    extra: Optional[str] = None

    def load(self) -> Any:
        return import_target(self.target)

    @property
    def install_hint(self) -> str:
        """The ``pip install`` that brings this entry's SDKs ('' for a plugin of another package)."""
        return f"pip install 'cloudtrain[{self.extra}]'" if self.extra else ""


class Table:
    """The entries of one kind by name (iterates over the names, sorted)."""

    def __init__(self, kind: str, entries: Iterable[Entry] = ()) -> None:
        self.kind = kind
        self._entries: Dict[str, Entry] = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: Entry) -> None:
        old = self._entries.get(entry.name)
        if old is not None and old.target != entry.target:
            raise DuplicateRegistration(
                f"{self.kind} {entry.name!r} is registered by both {old.plugin} ({describe(old.target)}) and "
                f"{entry.plugin} ({describe(entry.target)}); disable one (CLOUDTRAIN_DISABLE_PLUGINS)")
        self._entries.setdefault(entry.name, entry)

    def get(self, name: str) -> Optional[Entry]:
        return self._entries.get(name)

    def names(self) -> List[str]:
        return sorted(self._entries)

    def entries(self) -> List[Entry]:
        return [self._entries[name] for name in self.names()]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)


Tables = Dict[str, Table]


def describe(target: Any) -> str:
    if isinstance(target, str):
        return target
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', repr(target))}"


def empty() -> Tables:
    return {kind: Table(kind) for kind in KINDS}


def registrar(tables: Tables, kind: str, plugin: str, extra: Optional[str]) -> Callable[..., None]:
    """The ``register`` callable the ``kind`` hook of ``plugin`` gets."""
    keyword = HOOKS[kind][1]

    def register(target: Any, name: Optional[str] = None, **named: str) -> None:
        name = named.pop(keyword, None) or name
        if named:
            raise BadInput(f"plugin {plugin}: register() got unexpected keywords {sorted(named)}; "
                           f"use register('module:attr', {keyword}=...)")
        if not name and kind == PROVIDER and isinstance(target, type):
            name = getattr(target, "name", None)  # register(ProviderClass): the class names itself
        if not name:
            raise BadInput(f"plugin {plugin} registers {describe(target)!r} without a name; "
                           f"use register('module:attr', {keyword}='...')")
        if kind == STORE:
            name = name.lower()
        tables[kind].add(Entry(kind, name, target, plugin, extra))
    return register


def fill(tables: Tables, plugin: str, hooks: Dict[str, Callable[..., Any]], extra: Optional[str]) -> None:
    """Run one plugin's registering hooks (``kind -> hook function``) into ``tables``."""
    for kind, hook in hooks.items():
        hook(register=registrar(tables, kind, plugin, extra))


# -- what the cloudtrain distribution itself brings ----------------------------------------------
@functools.lru_cache(maxsize=None)
def own_entry_points() -> Tuple[Tuple[str, str], ...]:
    """(name, module) of the ``cloudtrain`` distribution's own plugins: its entry points in group
    ``cloudtrain`` (the name is the extra carrying the plugin's SDKs).  () when the distribution is
    not installed (sources on ``sys.path`` only).  From the one scan of the installed
    distributions (``launch.platform.group_entry_points``)."""
    return tuple(sorted((name, value) for dist, name, value in group_entry_points() if dist == DISTRIBUTION))


def extra_of(module: Optional[str]) -> Optional[str]:
    """The extra of a built-in plugin module (``cloudtrain_aws.plugin`` -> ``aws``), else None."""
    return {value: name for name, value in own_entry_points()}.get(module or "")


@functools.lru_cache(maxsize=None)
def builtin() -> Tables:
    """The tables of the built-in plugins alone, read from their hooks directly (a plugin
    disabled in this process is still built in: its install hint stays right)."""
    tables = empty()
    for extra, module_name in own_entry_points():
        module = import_target(module_name)
        hooks = {kind: getattr(module, hook) for kind, (hook, _) in HOOKS.items() if hasattr(module, hook)}
        fill(tables, extra, hooks, extra)
    return tables


def builtin_providers() -> List[str]:
    """The sorted names of the providers the ``cloudtrain`` distribution's own plugins register
    (what the contract suite runs over: a new built-in provider is covered by being registered)."""
    return builtin()[PROVIDER].names()


def install_hint(kind: str, name: str) -> str:
    """``pip install 'cloudtrain[EXTRA]'`` for a built-in ``kind`` entry ``name``, else ''."""
    entry = builtin()[kind].get(name)
    return entry.install_hint if entry else ""


def forget() -> None:
    """Forget the cached built-in tables (a test that changes the distribution's metadata)."""
    own_entry_points.cache_clear()
    builtin.cache_clear()
