"""``cloudtrain prune [--older-than 7d] [--dry-run]``: remove the run directories of finished
local and Docker jobs (each run holds a copy of the code, the nodes' logs and outputs) that ended
longer ago than ``--older-than``, and forget those jobs.  A job that is not finished is never
touched: its state is read as ``status`` reads it (a job whose supervisor is gone is FAILED first).
Only directories under ``$CLOUDTRAIN_HOME/runs`` are removed."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import List, Tuple

DEFAULT_AGE = "7d"


def add_parser(sub) -> None:
    p = sub.add_parser("prune", help="remove finished local/docker run directories (default: ended over 7d ago)")
    p.add_argument("--older-than", default=DEFAULT_AGE, metavar="AGE",
                   help="only jobs that ended longer ago than this: 90s, 30m, 8h, 2d (default: 7d)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")


def _size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            pass
    return total


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def prunable(age_seconds: float) -> List[Tuple[object, str, Path]]:
    """``(provider, job id, run directory)`` of every finished local-state job that ended more
    than ``age_seconds`` ago."""
    from .homedir import home
    from .plugins import get_provider, providers
    from .store import Store
    runs = (home() / "runs").resolve()
    if not (home() / "state.db").exists():
        return []
    store = Store()
    cutoff = time.time() - age_seconds
    found = []
    for name, info in sorted(providers().items()):
        if not getattr(info.cls, "local_state", False):
            continue
        provider = get_provider(name)
        for row in store.list_jobs(name, limit=1_000_000):
            status = provider.status(row["id"])  # reconciled: a dead supervisor's job is FAILED now
            if not status.terminal:
                continue
            ended = status.ended_at or row["created_at"]
            if ended > cutoff:
                continue
            run_dir = Path(row["run_dir"]).resolve()
            if run_dir.parent != runs:  # never outside $CLOUDTRAIN_HOME/runs
                continue
            found.append((provider, row["id"], run_dir))
    return found


def run(args) -> int:
    from .durations import parse_duration
    from .errors import BadInput
    try:
        age = parse_duration(args.older_than)
    except ValueError as exc:
        raise BadInput(f"--older-than: {exc}") from None
    jobs = prunable(age)
    freed = 0
    for provider, job_id, run_dir in jobs:
        size = _size(run_dir) if run_dir.exists() else 0
        freed += size
        if not args.dry_run:
            shutil.rmtree(run_dir, ignore_errors=True)
            provider.store.forget_job(job_id)
        print(f"{'would remove' if args.dry_run else 'removed'} {provider.handle(job_id)} ({_human(size)}, {run_dir})")
    verb = "would free" if args.dry_run else "freed"
    print(f"{len(jobs)} finished run{'s' if len(jobs) != 1 else ''} older than {args.older_than}; {verb} {_human(freed)}")
    return 0
