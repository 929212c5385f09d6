"""The constraints of ranktable routing that can be checked before submitting (Huawei's guide
"Using ranktable routing to train PyTorch on NPUs in a Lite Cluster resource pool").

Pure: reads the job's own files (its entry script and the local modules it imports), nothing else.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from cloudtrain.spec.job import JobSpec

# Calls that start worker processes themselves instead of being started by torchrun.
SPAWNERS = {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
            "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes"}
MAX_FILES = 200
_PYTHON = re.compile(r"^(.*/)?python(\d(\.\d+)*)?$")
_SHELL = re.compile(r"^(.*/)?(ba|z|da)?sh$")


def _dotted(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return head + "." + node.attr if head else None
    return None


def _aliases(tree: ast.AST) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    out[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def spawn_calls(source: str, filename: str = "<script>") -> List[Tuple[int, str]]:
    """``[(line, call)]`` of every ``mp.spawn``-like call in ``source``."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError:
        return []
    aliases = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if not name:
            continue
        head, _, rest = name.partition(".")
        full = aliases.get(head, head) + ("." + rest if rest else "")
        if full in SPAWNERS or name == "mp.spawn":
            found.append((node.lineno, name))
    return sorted(found)


def _module_files(root: Path, module: str) -> List[Path]:
    base = root.joinpath(*module.split("."))
    return [p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()]


def _imports(tree: ast.AST, here: Path, roots: List[Path]) -> Iterator[Path]:
    for node in ast.walk(tree):
        names: List[Tuple[Path, str]] = []
        if isinstance(node, ast.Import):
            names = [(r, a.name) for r in roots for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            bases = roots
            if node.level:
                up = here.parent
                for _ in range(node.level - 1):
                    up = up.parent
                bases = [up]
            mod = node.module or ""
            for r in bases:
                if mod:
                    names.append((r, mod))
                names += [(r, f"{mod}.{a.name}" if mod else a.name) for a in node.names]
        for root, name in names:
            yield from _module_files(root, name)


def entry_files(job: JobSpec) -> List[Path]:
    """The job's entry script(s) under its code directory: ``python x.py``, ``python -m pkg.mod``,
    or the ``*.py`` files a ``bash run.sh`` names."""
    code = job.code_path
    if code is None:  # code: null: the entry script is in the image
        return []
    argv = [a for a in job.argv if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", a)]
    if not argv:
        return []
    out: List[Path] = []
    head = argv[0]
    if _PYTHON.match(head):
        rest = [a for a in argv[1:] if a not in ("-u", "-B", "-O", "-OO")]
        if rest[:1] == ["-m"] and len(rest) > 1:
            main = code.joinpath(*rest[1].split("."), "__main__.py")
            out += _module_files(code, rest[1]) + ([main] if main.is_file() else [])
        elif rest and rest[0].endswith(".py"):
            out.append(code / rest[0])
    elif head.endswith(".py"):
        out.append(code / head)
    elif (_SHELL.match(head) and len(argv) > 1) or head.endswith(".sh"):
        script = code / (argv[1] if _SHELL.match(head) else head)
        if script.is_file():
            for token in re.findall(r"[\w./-]+\.py\b", script.read_text(errors="replace")):
                out.append(code / token.lstrip("./") if not token.startswith("/") else Path(token))
    return [p for p in out if p.is_file()]


def find_spawn(job: JobSpec) -> Optional[Tuple[Path, int, str]]:
    """The first ``mp.spawn``-like call in the job's entry script or the local modules it imports."""
    code = job.code_path
    if code is None or not code.is_dir():  # code: null: the image's code is not read
        return None
    todo = entry_files(job)
    seen: set = set()
    while todo and len(seen) < MAX_FILES:
        path = todo.pop(0).resolve()
        if path in seen:
            continue
        seen.add(path)
        try:
            source = path.read_text(encoding="utf-8", errors="replace")
            tree = ast.parse(source, str(path))
        except (OSError, SyntaxError, ValueError):
            continue
        calls = spawn_calls(source, str(path))
        if calls:
            return path, calls[0][0], calls[0][1]
        todo += [p for p in _imports(tree, path, [code, path.parent]) if p.resolve() not in seen]
    return None


def under(path: str, mount: str) -> bool:
    """Is ``path`` ``mount`` or inside it (POSIX paths)?"""
    p, m = path.rstrip("/") or "/", mount.rstrip("/") or "/"
    return p == m or p.startswith(m + "/") or m == "/"
