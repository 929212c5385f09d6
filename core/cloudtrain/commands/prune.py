"""``cloudtrain prune [--older-than AGE] [--keep-last N] [--dry-run]``: the retention rule of
local and Docker runs (``cloudtrain.providers.retention``) applied on demand, whole."""
from __future__ import annotations

from ..providers.retention import _human, _is_real_dir, _size, remove, select


def add_parser(sub) -> None:
    p = sub.add_parser("prune", help="remove finished local/docker run directories past runs.keep_days")
    p.add_argument("--older-than", default=None, metavar="AGE",
                   help="only jobs that ended longer ago than this: 90s, 30m, 8h, 2d (default: runs.keep_days "
                        "of the user config, 30d)")
    p.add_argument("--keep-last", type=int, default=None, metavar="N",
                   help="keep the newest N finished runs whatever their age (default: runs.keep_last, 10; "
                        "0 with --older-than)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")


def run(args) -> int:
    from ..input.config import retention, user_config_path
    from ..spec.durations import parse_duration
    from ..spec.errors import BadInput
    from ..runtime.store import Store
    if args.keep_last is not None and args.keep_last < 0:
        raise BadInput(f"--keep-last {args.keep_last}: expected 0 or more runs to keep")
    if args.older_than is not None:
        try:
            age = parse_duration(args.older_than)
        except ValueError as exc:
            raise BadInput(f"--older-than: {exc}") from None
        age_text, keep_last = args.older_than, args.keep_last or 0
    else:
        rule = retention()
        if rule.keep_days is None:  # rule.off
            print(f"retention is off (runs.keep_days in {user_config_path()}); nothing removed: "
                  "give --older-than AGE to prune now")
            return 0
        age, age_text = rule.keep_days * 86400, f"{rule.keep_days}d"
        keep_last = rule.keep_last if args.keep_last is None else args.keep_last
    found, refused = select(age, keep_last)
    store = Store() if found and not args.dry_run else None
    freed = 0
    done = 0
    for candidate in found:
        size = remove(candidate, store) if store is not None else (
            _size(candidate.run_dir) if _is_real_dir(candidate.run_dir) else 0)
        if size is None:
            print(f"could not remove all of {candidate.run_dir} ({candidate.handle}): some files there are not "
                  "yours (a Docker container's, written as root?); remove the rest (sudo rm -r), then prune again")
            continue
        done += 1
        freed += size
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {candidate.handle} ({_human(size)}, {candidate.run_dir})")
    for candidate in refused:
        print(f"left {candidate.handle} alone: {candidate.run_dir} is not a run directory of its own "
              "(a link, a file, or a running job's); remove it yourself if it is not needed")
    verb = "would free" if args.dry_run else "freed"
    kept = f", beyond the newest {keep_last}" if keep_last else ""
    print(f"{done} finished run{'s' if done != 1 else ''} older than {age_text}{kept}; "
          f"{verb} {_human(freed)}")
    return 0
