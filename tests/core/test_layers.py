"""Core's folders show its layers, and its modules import only downward: no import cycle between
core modules, whether the imports are at the top of a module or inside a function (a
function-level import only hides a cycle), and no import from a layer above.  The plugins too
(issue 38 item 4): no import cycle between the modules of the plugins, and a plugin's
``render.py`` (pure builders) reaches no module that holds a provider class.

The graph is read from the source with ``ast`` (nothing is imported); in core, imports under
``if TYPE_CHECKING:`` are left out (annotations only: never run, they make no cycle).  In the
plugins they count: render naming the provider class even for an annotation is render knowing
its provider, and the type checker walks that cycle.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

CORE = Path(__file__).resolve().parents[2] / "core"
PACKAGE = "cloudtrain"

# Bottom to top: a module may import from its own layer and the layers before it.
LAYERS = [
    "launch",       # the node launcher and the exit codes: standard library only, shipped to nodes
    "spec",         # the job file's model
    "extend",       # hook specs, plugin manager, registry
    "input",        # reading job files, settings, $CLOUDTRAIN_HOME, secrets
    "catalogs",     # instance catalogs, the instance chosen, prices
    "transfer",     # code shipping, object stores, storage, outputs
    "runtime",      # the state store, supervisors, processes on this machine
    "providers",    # the provider interface and what providers share
    "orchestrate",  # ledger, failover
    "api",          # cloudtrain.api, the Python API
    "testing",      # cloudtrain.testing, the contract suite third parties run
    "ui",           # the dashboard
    "commands",     # the command line
    "__main__",
]
ROOT_MODULES = {"api": "api", "__main__": "__main__"}  # modules that stay at the package's top

# Edges allowed for now, each with why; each entry must still be in the graph (delete it when its
# edge goes).  None: every module imports only from its own layer and the ones below.
PENDING: set = set()


def modules() -> Dict[str, Path]:
    found = {}
    for path in sorted((CORE / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(CORE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _runtime_nodes(tree: ast.AST):
    """Every node, but not the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def imports(mods: Dict[str, Path], packages: Set[str], nodes=_runtime_nodes) -> Dict[str, Dict[str, int]]:
    """module -> {imported module of ``mods``: line}, function-level imports included; an import
    of one of ``packages`` itself (its ``__init__``, which imports nothing eagerly) is no edge."""

    def resolve(name: str) -> Optional[str]:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    out: Dict[str, Dict[str, int]] = {}
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        package = name.split(".") if is_package else name.split(".")[:-1]
        deps: Dict[str, int] = {}
        for node in nodes(ast.parse(path.read_text(encoding="utf-8"))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)]
                    full = ".".join(base + ([node.module] if node.module else []))
                else:
                    full = node.module or ""
                targets = [f"{full}.{a.name}" if f"{full}.{a.name}" in mods else full for a in node.names]
            for target in targets:
                if target in packages or target.split(".")[0] not in packages:
                    continue  # the package itself, or outside
                found = resolve(target)
                if found and found != name and found not in packages:
                    deps.setdefault(found, node.lineno)
        out[name] = deps
    return out


def graph() -> Dict[str, Dict[str, int]]:
    """core module -> {imported core module: line}, function-level imports included."""
    return imports(modules(), {PACKAGE})


def layer_of(module: str) -> Optional[str]:
    parts = module.split(".")
    if len(parts) == 1:
        return None  # the package's own __init__
    if parts[1] in LAYERS and parts[1] not in ROOT_MODULES:
        return parts[1]
    return ROOT_MODULES.get(parts[1]) if len(parts) == 2 else None


def cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on_stack: Set[str] = set()
    stack: List[str] = []
    found: List[List[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycle_between_core_modules():
    g = graph()
    edges = {m: {d for d in deps if (m, d) not in PENDING} for m, deps in g.items()}
    found = cycles(edges)
    assert not found, "import cycles (function-level imports included): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_every_core_module_is_in_a_layer():
    unplaced = [m for m in modules() if m != PACKAGE and layer_of(m) is None]
    assert not unplaced, f"modules at core's top that belong in a layer (a subpackage): {unplaced}"


def test_layers_import_only_downward():
    upward = []
    for module, deps in sorted(graph().items()):
        here = layer_of(module)
        if here is None:
            continue
        for dep, line in sorted(deps.items()):
            there = layer_of(dep)
            if there is not None and LAYERS.index(there) > LAYERS.index(here) and (module, dep) not in PENDING:
                upward.append(f"{module}:{line} imports {dep} ({here} -> {there})")
    assert not upward, "imports from a layer above:\n" + "\n".join(upward)


def test_pending_exceptions_are_still_needed():
    g = graph()
    gone = [edge for edge in PENDING if edge[1] not in g.get(edge[0], {})]
    assert not gone, f"these edges are gone: remove them from PENDING: {gone}"


# -- the plugins (issue 38 item 4) -------------------------------------------------------------
PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def plugin_modules() -> Dict[str, Path]:
    """Every module of every plugin package under plugins/ (``cloudtrain_aws.sagemaker``, ...)."""
    found = {}
    for package in sorted(p.parent for p in PLUGINS.glob("*/__init__.py")):
        for path in sorted(package.rglob("*.py")):
            parts = list(path.relative_to(PLUGINS).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def plugin_graph() -> Dict[str, Dict[str, int]]:
    """plugin module -> {imported plugin module (of any plugin): line}: every import, at the top,
    inside a function, or under ``if TYPE_CHECKING:``."""
    mods = plugin_modules()
    return imports(mods, {m.split(".")[0] for m in mods}, nodes=ast.walk)


def provider_modules() -> Set[str]:
    """The modules of the classes the built-in plugins register as providers (their ``plugin.py``
    names them: ``register("cloudtrain_aws.sagemaker:SageMakerProvider", name="sagemaker")``)."""
    from cloudtrain.extend import registry
    found = {str(e.target).split(":")[0] for e in registry.builtin()[registry.PROVIDER].entries()}
    return found | {m for m in plugin_modules() if m.endswith(".provider")}


def reached(g: Dict[str, Dict[str, int]], start: str) -> Set[str]:
    seen: Set[str] = set()
    stack = [start]
    while stack:
        for dep in g.get(stack.pop(), {}):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen


def test_the_plugin_graph_is_read_from_the_source():
    g = plugin_graph()
    assert g["cloudtrain_kubernetes.provider"].get("cloudtrain_kubernetes.render")  # `from . import ..., render`
    assert "cloudtrain_kubernetes.provider" in g["cloudtrain_modelarts.lite"]      # another plugin's module
    assert {"cloudtrain_aws.sagemaker", "cloudtrain_modelarts.lite", "cloudtrain_tione.provider"} <= provider_modules()


def test_no_import_cycle_between_plugin_modules():
    found = cycles({m: set(deps) for m, deps in plugin_graph().items()})
    assert not found, "import cycles between plugin modules (function-level and TYPE_CHECKING imports " \
                      "included): " + "; ".join(" <-> ".join(c) for c in found)


def test_render_reaches_no_provider_module():
    g, providers = plugin_graph(), provider_modules()
    renders = sorted(m for m in g if m.endswith(".render"))
    assert len(renders) == len(list(PLUGINS.glob("*/render.py"))) >= 7
    bad = {r: sorted(reached(g, r) & providers) for r in renders}
    bad = {r: found for r, found in bad.items() if found}
    assert not bad, f"render.py is pure and knows no provider class, but imports (directly or through other " \
                    f"modules) the providers' modules: {bad}"
