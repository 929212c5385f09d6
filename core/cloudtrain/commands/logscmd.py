"""``cloudtrain logs``: the job's log, or the part asked for (``--node``, ``--rank``, ``--since``,
``--tail``: ``cloudtrain.runtime.logselect``), and for a failed job the first failing rank's last
lines first, on stderr (the launcher's own report of it, read as the supervisors read it:
``cloudtrain.launch.failure.FailureReader``), so the cause is on the screen before the log.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict, Iterable, List, Optional

FAILED_TAIL = 10  # the failing rank's lines shown first


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", type=int, metavar="N", help="only node N's lines (0 is the first node)")
    p.add_argument("--rank", type=int, metavar="R", help="only global rank R's lines")
    p.add_argument("--since", metavar="WHEN", help="only lines written since: 10m, 2h, 1d, or a time 2026-11-20T08:00")
    p.add_argument("--tail", type=int, metavar="N", help="only the last N lines (then -f goes on from there)")


def selection(args):
    from ..runtime.logselect import LogSelection
    from ..spec.errors import BadInput
    for name in ("node", "rank", "tail"):
        value = getattr(args, name, None)
        if value is not None and value < 0:
            raise BadInput(f"logs --{name} {value}: a number 0 or more")
    since = None
    if getattr(args, "since", None):
        from ..orchestrate.ledger import since as parse_since
        since = parse_since(args.since)
    return LogSelection(node=args.node, rank=args.rank, since=since, tail=args.tail)


def first_failure(lines: Iterable[str]) -> Optional[dict]:
    """``{"node", "rank", "reason"}`` of the first rank the launchers reported failing in the
    log's ``lines`` (``cloudtrain launch: rank R ... failed first``), or None."""
    from ..launch.failure import FailureReader
    from ..runtime.logselect import PREFIX, origin
    readers: Dict[int, FailureReader] = {}
    first: Optional[int] = None
    for line in lines:
        node, _ = origin(line)
        found = PREFIX.match(line)
        text = line[found.end():] if found else line
        if not text.startswith("cloudtrain launch: "):
            continue
        key = node if node is not None else 0
        reader = readers.setdefault(key, FailureReader())
        reader.feed(text)
        if first is None and reader.rank is not None:
            first = key
    if first is None:
        return None
    reader = readers[first]
    return {"node": first, "rank": reader.rank, "reason": reader.reason(first)}


def failure_header(run, status, lines: Optional[List[str]] = None) -> List[str]:
    """What ``logs`` of a failed job says first: the first failing rank (its node, its exit, its
    last lines), as ``submit`` says it on failure; empty for a job that did not fail."""
    from ..spec.states import State
    if status.state != State.FAILED:
        return []
    from ..runtime.logselect import LogSelection
    if lines is None:
        lines = list(_log_tail(run))
    found = first_failure(lines)
    out = [f"cloudtrain: {run.handle} failed: {found['reason'] if found else status.message}"]
    if found is None:
        return out
    which = LogSelection(node=found["node"], rank=found["rank"], tail=FAILED_TAIL)
    try:
        last = list(run.provider.select_logs(run.id, which)) if getattr(run.provider, "local_state", False) \
            else _pick(lines, which)
    except Exception:  # noqa: BLE001 -- feedback first; the log itself follows whatever happens here
        last = []
    last = [x for x in last if not x.startswith("[cloudtrain] ")]
    if not last:  # a platform whose lines tell the node only (pod logs): that node's last lines
        last = [x for x in _pick(lines, LogSelection(node=found["node"], tail=FAILED_TAIL))
                if not x.startswith("[cloudtrain] ")]
    if last:
        out.append(f"cloudtrain: its last lines (node {found['node']} rank {found['rank']}):")
        out += ["  " + x.rstrip("\n") for x in last]
    return out


def _pick(lines: List[str], which) -> List[str]:
    from ..runtime.logselect import select
    return list(select(lines, which))


def _log_tail(run) -> Iterable[str]:
    """The lines the failure is looked for in: a local or Docker job's log from its end (4 MiB at
    most, oldest first again); another provider's whole log."""
    if getattr(run.provider, "local_state", False):
        from ..runtime.progress import lines_backwards
        return [x + "\n" for x in reversed(list(lines_backwards(run.provider.run_dir(run.id) / "job.log")))]
    return list(run.logs())


def run(args, out=None, err=None) -> int:
    from ..api import attach
    from .progress import printable, to_terminal
    out = out or sys.stdout
    err = err or sys.stderr
    picked = selection(args)
    job = attach(args.handle, profile=args.profile)
    shown = printable if to_terminal(out) else str  # a pipe or a file gets the bytes as they are
    cloud_lines: Optional[List[str]] = None
    if not args.follow:
        status = job.status()
        if not getattr(job.provider, "local_state", False) and status.state.value == "FAILED":
            cloud_lines = list(job.logs())  # read once: the failure and the selection both come from it
        for line in failure_header(job, status, cloud_lines):
            print(printable(line), file=err)
        err.flush()
    if cloud_lines is not None and not picked.empty:
        job.provider.select_logs(job.id, picked)  # (its refusal of a selector it cannot honour)
        from ..runtime.logselect import select
        lines: Iterable[str] = select(cloud_lines, picked)
    elif cloud_lines is not None:
        lines = cloud_lines
    elif picked.empty:
        lines = job.logs(follow=args.follow)
    else:
        lines = job.provider.select_logs(job.id, picked, follow=args.follow)
    for line in lines:
        out.write(shown(line))
        out.flush()
    return 0
