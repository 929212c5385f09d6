"""A job without a file, TorchX's habit (``torchx run dist.ddp -j 2x2 --script train.py``):
``cloudtrain submit -j 2x2 --script train.py [-- ARGS]`` makes the JobSpec a job file would::

    name: train                 # the script's name, as a job name (--set name=... for another)
    code: .                     # the current directory
    command: [python, train.py, ARGS...]
    distribution: {type: ddp, nodes: 2, procs_per_node: 2}

``--set`` goes on top as it does on a file; render and validate read it the same way.
(TorchX: ``torchx/components/dist.py``, ``ddp(j="1x2", script=...)``: ``-j`` is
``{nnodes}x{nproc_per_node}``; a bare ``-j 4`` is one node of 4 processes.)
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

from ..spec.errors import BadInput

J_HINT = "write -j NODESxPROCS, e.g. -j 2x4 (2 nodes, 4 processes per node) or -j 4 (one node, 4 processes)"


def parse_j(text: str) -> Tuple[int, int]:
    """``"2x4"`` -> (2, 4); ``"4"`` -> (1, 4), as TorchX reads ``-j``."""
    found = re.fullmatch(r"\s*(?:(\d+)\s*[xX]\s*)?(\d+)\s*", text or "")
    if not found:
        raise BadInput(f"-j {text!r}: {J_HINT}")
    nodes, procs = int(found.group(1) or 1), int(found.group(2))
    if nodes < 1 or procs < 1:
        raise BadInput(f"-j {text!r}: nodes and processes are 1 or more; {J_HINT}")
    return nodes, procs


def job_name(script: str) -> str:
    """The script's file name as a job name: lowercase letters, digits and '-' (``my_train.py`` ->
    ``my-train``)."""
    stem = Path(script).stem.lower()
    name = re.sub(r"[^a-z0-9]+", "-", stem).strip("-")[:63].strip("-")
    if not name or not name[0].isalnum():
        name = ("job-" + name).strip("-")
    return name


def one_line_job(j: Optional[str], script: Optional[str], script_args: List[str]) -> dict:
    """The job file's data for ``-j J --script SCRIPT -- ARGS``."""
    if not script:
        raise BadInput(f"-j {j} needs the script every process runs: --script train.py "
                       "(its arguments after --: --script train.py -- --lr 0.1)")
    nodes, procs = parse_j(j) if j else (1, 1)
    if not Path(script).is_file():
        raise BadInput(f"--script {script}: no such file here; the current directory is the code every node gets, "
                       "and the script a path in it")
    return {"name": job_name(script), "code": ".", "command": ["python", script, *script_args],
            "distribution": {"type": "ddp", "nodes": nodes, "procs_per_node": procs}}


def load(j: Optional[str], script: Optional[str], script_args: List[str], overrides, *,
         provider: Optional[str], settings):
    """The JobSpec of a one-line job (``job_from_dict`` as a file's, without a file)."""
    from .loading import job_from_dict
    return job_from_dict(one_line_job(j, script, script_args), overrides=overrides, provider=provider,
                         settings=settings)
