"""``cloudtrain stacks HANDLE``: every rank's Python stack of a running job, node by node
(``cloudtrain.runtime.stacks``): the first thing anyone wants from a job that hangs."""
from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("stacks", help="every rank's Python stack of a running job (py-spy dump); the job goes on")
    p.add_argument("handle", help="PROVIDER://ID")
    p.add_argument("--node", type=int, metavar="N", help="only node N (default: every node)")
    p.add_argument("--profile", metavar="NAME", help="settings profile of the config files")


def run(args: argparse.Namespace) -> int:
    from ..api import attach
    from ..runtime.stacks import by_signal, dump, dump_lines, py_spy, ranks_below
    from ..spec.errors import BadInput
    from .progress import printable
    from ..providers.hosted import HostedProvider
    job = attach(args.handle, profile=args.profile)
    provider = job.provider
    if not isinstance(provider, HostedProvider):
        from ..extend.plugins import providers
        able = sorted(n for n, i in providers().items() if issubclass(i.cls, HostedProvider))
        raise BadInput(f"{provider.name} gives no way to read a running rank's stack (cloudtrain stacks works on "
                       f"{', '.join(able)}, whose nodes run on this machine; elsewhere, cloudtrain logs shows what a "
                       "stalled node dumped when stall_timeout is set)")
    status = job.status()
    nodes = [args.node] if args.node is not None else list(range(status.nodes or 1))
    spy = py_spy()
    log = provider.run_dir(job.id) / "job.log"
    unread = []
    for node in nodes:
        ranks = ranks_below(provider.node_pids(job.id, node))
        if not ranks:
            print(f"== node {node}: no Python process", flush=True)
        if spy is None:
            found, skipped = by_signal(ranks, log)
            for rank, lines in sorted(found.items()):
                print(f"== node {node} rank {rank} (faulthandler)", flush=True)
                print("\n".join(printable(line) for line in dump_lines(lines)) or "(it wrote no stack in time)")
            unread += [f"node {node} {'rank %d' % r if r is not None else 'process'} (pid {p})" for r, p in skipped]
            continue
        for rank, pid in ranks:
            where = f"rank {rank}" if rank is not None else "process"
            print(f"== node {node} {where} (pid {pid})", flush=True)
            sys.stdout.write(printable(dump(pid, spy)))
            sys.stdout.flush()
    if unread:
        print(f"cloudtrain: py-spy is not installed here (pip install py-spy) and {', '.join(unread)} did not arm "
              "faulthandler (ranks whose nodes all run on this machine, on loopback, do): their stacks are not "
              "shown", file=sys.stderr)
        return 1
    return 0
