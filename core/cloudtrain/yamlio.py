"""YAML in and out, through libyaml when PyYAML has it (the C parser and emitter are about ten
times faster than the pure-Python ones: a Kubernetes render carries the launcher's source in a
ConfigMap, and emitting it was most of ``cloudtrain render``'s own time)."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import yaml

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Emitter = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class Dumper(_Emitter):
    """Safe YAML; a string with line breaks is written as a literal block (``|``), so scripts
    and files in a rendered request read as they are (the emitter falls back to quotes where a
    block cannot hold the text exactly)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


Dumper.add_representer(str, _represent_str)


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=100)


def parse(text: str) -> Tuple[Optional[yaml.Node], Any]:
    """The document's node tree (with line marks) and its data, from one parse."""
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def load(text: str) -> Any:
    return yaml.load(text, Loader=Loader)
