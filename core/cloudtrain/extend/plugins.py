"""The plugin manager: pluggy, the ``cloudtrain`` entry-point group, and the registry of what
the installed plugins register (``tables()``; its kinds and rules: ``cloudtrain.extend.registry``).

Plugins are found through entry points (the built-in ones too), plus modules named in
``$CLOUDTRAIN_PLUGINS`` (comma-separated; handy for a plugin under development).  Plugins named
in ``$CLOUDTRAIN_DISABLE_PLUGINS`` (or passed to ``disable``) are blocked.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Type, Union

import pluggy

from . import hookspecs, registry
from ..spec.errors import BadInput, UnknownProvider
from ..launch.platform import import_target, installed_entry_points

_pm: Optional[pluggy.PluginManager] = None
_tables: Optional[registry.Tables] = None
_providers: Optional[Dict[str, "ProviderInfo"]] = None
_disabled: set = set()


class ProviderInfo:
    """A registered provider (its ``registry.Entry``).  ``cls`` is imported on first use when the
    plugin registered it by name (``register("pkg.module:Class", name="x")``), so a command that
    uses one provider never imports the others' modules."""

    def __init__(self, name: str, cls_or_target: Union[str, type], plugin: str,
                 extra: Optional[str] = None) -> None:
        entry = registry.Entry(registry.PROVIDER, name, cls_or_target, plugin, extra)
        self.entry = entry
        self.name, self.plugin = entry.name, entry.plugin
        self.target: Optional[str] = entry.target if isinstance(entry.target, str) else None
        self._cls: Optional[type] = None if self.target else entry.target

    @property
    def cls(self) -> Type[Any]:
        if self._cls is None:
            cls = self.entry.load()
            if cls.name != self.name:
                raise BadInput(f"{self.target} is registered as provider {self.name!r} but calls itself "
                               f"{cls.name!r}; fix the plugin {self.plugin}")
            self._cls = cls
        return self._cls

    @property
    def extra(self) -> str:
        """The extra carrying the provider's SDKs: the table's (a built-in plugin's entry-point
        name), else what the class says."""
        return self.entry.extra or self.cls.extra

    def sdk_missing(self) -> List[str]:
        """The provider's SDK modules that cannot be imported (found without importing them)."""
        return [module for module in self.cls.sdk_modules if not module_installed(module)]


def module_installed(name: str) -> bool:
    """Whether ``name`` (dotted) can be imported, found on sys.path without importing anything
    (``importlib.util.find_spec("a.b")`` would import ``a``: for ``azure.ai.ml``, the package)."""
    from importlib.machinery import PathFinder
    if name in sys.modules:
        return sys.modules[name] is not None  # None: an import of it failed, or was blocked
    parts = name.split(".")
    path = None
    for i, part in enumerate(parts):
        spec = PathFinder.find_spec(part, path)
        if spec is None:
            return False
        path = spec.submodule_search_locations
        if path is None and i < len(parts) - 1:
            return False  # a module, not a package, where a package was needed
    return True


def _blocked_names() -> set:
    names = {n.strip() for n in os.environ.get("CLOUDTRAIN_DISABLE_PLUGINS", "").split(",") if n.strip()}
    return names | _disabled


def get_plugin_manager() -> pluggy.PluginManager:
    global _pm
    if _pm is None:
        pm = pluggy.PluginManager("cloudtrain")
        pm.add_hookspecs(hookspecs)
        for name in _blocked_names():
            pm.set_blocked(name)
        for name, value in installed_entry_points():  # the one scan of the installed distributions
            if not (pm.has_plugin(name) or pm.is_blocked(name)):
                pm.register(import_target(value), name=name)
        for module_name in filter(None, (m.strip() for m in os.environ.get("CLOUDTRAIN_PLUGINS", "").split(","))):
            if pm.is_blocked(module_name) or pm.has_plugin(module_name):
                continue
            try:
                module = import_target(module_name)
                if not pm.is_registered(module):  # already loaded through its entry point
                    pm.register(module, name=module_name)
            except ImportError as exc:
                raise BadInput(f"CLOUDTRAIN_PLUGINS names {module_name!r}, which cannot be imported: {exc}; "
                               "fix the module path or unset CLOUDTRAIN_PLUGINS") from None
        pm.check_pending()
        _pm = pm
    return _pm


def register_plugin(plugin, name: Optional[str] = None) -> None:
    """Register a plugin object or module at run time (tests, embedding applications)."""
    get_plugin_manager().register(plugin, name=name)
    _reset_providers()


def unregister_plugin(name: str) -> None:
    pm = get_plugin_manager()
    plugin = pm.get_plugin(name)
    if plugin is not None:
        pm.unregister(plugin)
    _reset_providers()


def disable(*names: str) -> None:
    """Block plugins by name (takes effect for the next plugin manager)."""
    _disabled.update(names)
    reset()


def reset() -> None:
    """Forget the plugin manager and registry (the next call loads plugins again)."""
    global _pm
    _pm = None
    _reset_providers()


def _reset_providers() -> None:
    global _tables, _providers
    _tables = _providers = None


def tables() -> registry.Tables:
    """The registry of every installed (not disabled) plugin: a ``registry.Table`` per kind,
    filled by the plugins' ``cloudtrain_register_*`` hooks, nothing imported but the plugins."""
    global _tables
    if _tables is None:
        pm = get_plugin_manager()
        found = registry.empty()
        for kind, (hook, _) in registry.HOOKS.items():
            for impl in getattr(pm.hook, hook).get_hookimpls():
                module_name: str = getattr(impl.plugin, "__name__", "?")
                plugin = pm.get_name(impl.plugin) or module_name
                registry.fill(found, plugin, {kind: impl.function}, registry.extra_of(module_name))
        _tables = found
    return _tables


def providers() -> Dict[str, ProviderInfo]:
    """Every registered provider by name, with the plugin that registered it."""
    global _providers
    if _providers is None:
        entries = tables()[registry.PROVIDER].entries()
        _providers = {e.name: ProviderInfo(e.name, e.target, e.plugin, e.extra) for e in entries}
    return _providers


def catalog_refresher(provider: str) -> Optional[str]:
    """The ``module:function`` a plugin registered to refresh ``provider``'s catalog, or None."""
    entry = tables()[registry.CATALOG].get(provider)
    return entry.target if entry else None


def get_provider_class(name: str) -> Type[Any]:
    found = providers()
    if name not in found:
        from ..spec.suggest import did_you_mean
        known = ", ".join(found) or "none"
        hint = did_you_mean(name, found)
        if hint:
            raise UnknownProvider(f"unknown provider {name!r}{hint} (installed providers: {known})")
        raise UnknownProvider(f"unknown provider {name!r}; installed providers: {known}. "
                              "Install its plugin (cloudtrain providers lists what is installed)")
    return found[name].cls


def get_provider(name: str, **arguments):
    """An instance of provider ``name``; ``arguments``: its constructor's typed keyword arguments
    (injected SDK clients for tests and fakes, ``poll=``, ...)."""
    return get_provider_class(name)(**arguments)
