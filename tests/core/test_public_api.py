"""What a plugin or a script imports comes from ``cloudtrain`` itself (docs/plugins.md, "What a
plugin imports"): every public name resolves, and the plugin written in docs/plugins.md imports
nothing from core's layers, only ``cloudtrain``, the node side's ``cloudtrain.launch`` and the
contract suite's ``cloudtrain.testing``."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import cloudtrain

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_public_name_resolves_to_its_module_s_object():
    import importlib
    for name in cloudtrain.__all__:
        value = getattr(cloudtrain, name)
        module = importlib.import_module("cloudtrain." + cloudtrain._API[name])
        assert value is getattr(module, name), name


def test_plugins_md_imports_only_the_public_api():
    text = (DOCS / "plugins.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    imported = []
    for block in blocks:
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue  # a signature shown as a block (``def hook(register) -> None``), not a module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "cloudtrain":
                imported.append((node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                imported += [(a.name, []) for a in node.names if a.name.split(".")[0] == "cloudtrain"]
    assert imported
    public = ("cloudtrain.launch.", "cloudtrain.testing")
    inside = [m for m, _ in imported if m != "cloudtrain" and not m.startswith(public)]
    assert not inside, f"docs/plugins.md imports core's inside: {inside}; import these names from cloudtrain"
    unknown = [n for m, names in imported if m == "cloudtrain" for n in names if n not in cloudtrain.__all__]
    assert not unknown, f"not in cloudtrain.__all__: {unknown}"
