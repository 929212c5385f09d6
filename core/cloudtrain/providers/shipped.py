"""What ``cloudtrain render`` shows a person: the platform's own request first, and each file
cloudtrain ships to the nodes inside it (the launcher's source, e.g. in a Kubernetes ConfigMap)
as one line, its size and sha256, instead of its thousands of lines (issue 44, item 7: a
kubeflow PyTorchJob started at line 2,792 of 3,045).  ``render --full``, ``-o yaml`` and
``-o json`` print everything, byte for byte what a submit sends.

The shipped files are known here, in core, by their content: the files of the launcher bundle
(``cloudtrain.launch.bundle``: the launcher, the modules it shares, every installed platform's
detector, ``entry.sh``), whichever provider carries them and however it names them.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any, Dict, List, Tuple

from ..spec import yamlio


@lru_cache(maxsize=1)
def shipped_texts() -> Dict[str, str]:
    """``{text: its path in the bundle}`` of every file a provider may ship to the nodes."""
    from ..launch.bundle import ENTRY, bundle_sources
    from ..launch.platform import installed
    out: Dict[str, str] = {ENTRY: "entry.sh"}
    targets = []
    for platform in installed():  # a plugin that cannot load ships nothing here
        try:
            targets.append(platform)
            bundle_sources([platform])
        except Exception:  # noqa: BLE001  (said by `cloudtrain providers`, not by a render)
            targets.pop()
    for origin, rel in bundle_sources(targets):
        try:
            out.setdefault(origin.read_text(encoding="utf-8"), rel.as_posix())
        except (OSError, UnicodeDecodeError):
            continue
    return out


SUMMARY_WIDTH = 200


def summary(text: str) -> str:
    """One line for a shipped file's text: its size and sha256."""
    data = text.encode("utf-8")
    return f"{len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}"


def _summarized(content: Any, known: Dict[str, str], found: List[str]) -> Any:
    if isinstance(content, str):
        if content in known:
            found.append(known[content])
            return summary(content)
        return content
    if isinstance(content, dict):
        return {k: _summarized(v, known, found) for k, v in content.items()}
    if isinstance(content, (list, tuple)):
        return [_summarized(v, known, found) for v in content]
    return content


def shown(artifacts) -> List[Tuple[Any, Any, int]]:
    """``(artifact, content as shown, shipped files in it)``: the artifacts without shipped files
    first (the platform's request), in the order a submit sends them, then those that carry
    shipped files, each of those files summarized."""
    known = shipped_texts()
    plain: List[Tuple[Any, Any, int]] = []
    carriers: List[Tuple[Any, Any, int]] = []
    for a in artifacts:
        found: List[str] = []
        content = _summarized(a.content, known, found)
        (carriers if found else plain).append((a, content, len(found)))
    return plain + carriers


def to_text(artifacts) -> str:
    """The artifacts as ``Rendered.to_yaml`` prints them, shipped files summarized and last."""
    docs = []
    for a, content, files in shown(artifacts):
        head = f"# {a.kind}: {a.name}\n"
        if files:
            head += (f"# {files} file{'s' if files != 1 else ''} shipped to every node (the launcher): here their size "
                     "and sha256, in full with --full\n")
        if isinstance(content, str):
            docs.append(head + content.rstrip("\n") + "\n")
        else:  # (a summary on one line: a file's name, its size and its digest)
            docs.append(head + yamlio.dump(content, width=SUMMARY_WIDTH if files else yamlio.WIDTH))
    return "---\n".join(docs)
