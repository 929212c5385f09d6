"""Ship the launcher: copy it, with the platforms a job needs, into a directory for PYTHONPATH.

Container and cloud providers put this directory next to the job's code, so ``python3 -m
cloudtrain.launch`` runs in any image that has Python 3.8+ and nothing else.  Standard
library only.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Iterable, List

ENTRY = """#!/bin/sh
# cloudtrain node entry: ssh for mpirun between nodes (when a key is mounted), then the command.
set -e
if [ -f /run/cloudtrain/ssh/id_ed25519 ]; then
  ssh_dir="${HOME:-/root}/.ssh"
  mkdir -p "$ssh_dir" && chmod 700 "$ssh_dir"
  cp /run/cloudtrain/ssh/id_ed25519 "$ssh_dir/id_ed25519" && chmod 600 "$ssh_dir/id_ed25519"
  cp /run/cloudtrain/ssh/id_ed25519.pub "$ssh_dir/authorized_keys" && chmod 600 "$ssh_dir/authorized_keys"
  if [ -x /usr/sbin/sshd ] && [ "$(id -u)" = 0 ]; then mkdir -p /run/sshd && /usr/sbin/sshd; fi
fi
# A lease (a FIFO whose only writer is the host process that owns this node): when that
# process is gone, by any death, the kernel closes its end, the read below ends, and this node
# stops itself (every process but init, which then ends the container).
lease="${CLOUDTRAIN_LEASE:-}"
if [ -n "$lease" ] && [ -p "$lease" ] && [ -r "$lease" ]; then
  ( trap '' TERM INT HUP
    while IFS= read -r _ 2>/dev/null; do :; done < "$lease"
    echo "cloudtrain launch: the host process that owned this node is gone (its lease closed): stopping" >&2
    kill -TERM -1 2>/dev/null; sleep 10; kill -KILL -1 2>/dev/null ) </dev/null &
fi
exec "$@"
"""

# Modules of cloudtrain outside ``cloudtrain.launch`` that the launcher (or a platform's node
# module) imports: standard library only as well.
SHARED = ("cloudtrain.launch.exitcodes",)


def _sources(module: str) -> List[tuple]:
    """(file, path under the bundle) for ``module`` and every package above it."""
    out = []
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not os.path.isfile(spec.origin):
            raise ImportError("cannot find the source of %r" % name)
        origin = Path(spec.origin)
        rel = Path(*parts[:i], "__init__.py") if origin.name == "__init__.py" else Path(*parts[:i - 1], origin.name)
        out.append((origin, rel))
    return out


def bundle_sources(platforms: Iterable = ()) -> List[tuple]:
    """(file, path under the bundle) of every module ``write_bundle`` copies: ``cloudtrain.launch``
    (with the generic platform), the ``SHARED`` modules it imports and the modules of
    ``platforms`` (``Platform`` objects, or ``module:function`` detector targets), each with the
    packages above it (a package's ``__init__.py`` can appear more than once)."""
    here = sorted(Path(__file__).parent.glob("*.py"))
    modules = ["cloudtrain.launch." + p.stem for p in here if p.stem != "__init__"]
    modules += SHARED
    for platform in platforms:
        modules += [platform.partition(":")[0]] if isinstance(platform, str) else list(platform.modules)
    return [pair for module in modules for pair in _sources(module)]


def write_bundle(dest, platforms: Iterable = ()) -> Path:
    """Copy the modules of ``bundle_sources(platforms)`` under ``dest``; add ``entry.sh``."""
    dest = Path(dest)
    for origin, rel in bundle_sources(platforms):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(origin, target)
    (dest / "entry.sh").write_text(ENTRY)
    return dest
