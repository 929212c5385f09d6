"""``python -m cloudtrain.launch.mpirank -- COMMAND``: one MPI rank, PyTorch's variables set.

mpirun/horovodrun start the ranks; Open MPI (``OMPI_COMM_WORLD_*``), MPICH/Hydra (``PMI_*``)
and Intel MPI name them differently.  This shim exports ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and ``CLOUDTRAIN_NODE_RANK`` from them, and ``MASTER_ADDR``/
``MASTER_PORT`` (node 0, where rank 0 runs, and the job's master port) from the launcher's
``CLOUDTRAIN_MASTER_ADDR``/``_PORT``, then execs the command, so a script reads the same
variables under every launcher (torch's ``env://``, DeepSpeed over MPI).

``--setup=COMMAND`` (before ``--``; Azure ML, where mpirun starts the ranks with no
``cloudtrain launch`` per node) runs the job's setup once per node before any rank's command:
``setup.once_per_node``.  Standard library only.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Mapping, Optional

from .exitcodes import EXIT_BAD_INPUT, EXIT_COMMAND_NOT_FOUND, EXIT_JOB_FAILED
from . import setup

SOURCES = {
    "RANK": ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"),
    "WORLD_SIZE": ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"),
    "LOCAL_RANK": ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"),
    "LOCAL_WORLD_SIZE": ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"),
}


def rank_environment(environ: Mapping[str, str]) -> Dict[str, str]:
    env: Dict[str, str] = {}
    for target, names in SOURCES.items():
        for name in names:
            if environ.get(name):
                env[target] = environ[name]
                break
    # -H lists node 0 first and --map-by slot fills its slots first: rank 0 runs on the master
    for target, source in (("MASTER_ADDR", "CLOUDTRAIN_MASTER_ADDR"), ("MASTER_PORT", "CLOUDTRAIN_MASTER_PORT")):
        if environ.get(source):
            env[target] = environ[source]
    nproc = environ.get("CLOUDTRAIN_NPROC_PER_NODE", "")
    if "RANK" in env and nproc.isdigit() and int(nproc) > 0:
        # -H lists every node's slots in node order and --map-by slot fills them in order
        env["CLOUDTRAIN_NODE_RANK"] = str(int(env["RANK"]) // int(nproc))
    return env


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = None
    if argv and argv[0].startswith("--setup="):  # one argument, whatever it holds: setup hands it to sh -c
        command, argv = argv[0][len("--setup="):], argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("usage: python -m cloudtrain.launch.mpirank [--setup=COMMAND] -- COMMAND ...", file=sys.stderr)
        return EXIT_BAD_INPUT
    env = dict(os.environ)
    env.update(rank_environment(env))
    if command is not None:
        failed = setup.once_per_node(command, env)
        if failed:
            print("cloudtrain launch: %s" % failed, file=sys.stderr, flush=True)
            return EXIT_JOB_FAILED
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError:
        print("cloudtrain launch: %s: command not found on this node" % argv[0], file=sys.stderr)
        return EXIT_COMMAND_NOT_FOUND


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
