"""``python -m cloudtrain_modelarts.stage JOB.yaml DIR``: the code a ModelArts Standard job runs.

Copies the job's ``code`` directory to ``DIR`` with the launcher bundle (``DIR/.cloudtrain``,
including the ModelArts detector), so that ``DIR`` can be copied to OBS (``obsutil cp -r DIR
obs://bucket/path/``) and named in ``providers.modelarts.code_dir``.  cloudtrain does not upload
to OBS itself: the OBS SDK (esdk-obs-python) is not among its dependencies.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from cloudtrain import shipping
    from cloudtrain.errors import CloudtrainError
    from cloudtrain.loading import load_job
    from .standard import ModelartsProvider

    p = argparse.ArgumentParser(prog="python -m cloudtrain_modelarts.stage", description=__doc__.split("\n\n")[0])
    p.add_argument("job", help="the job file")
    p.add_argument("dest", help="directory to create (must not exist, or be empty)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    dest = Path(args.dest)
    try:
        if dest.exists() and any(dest.iterdir()):
            print(f"{dest} is not empty; give a new directory", file=sys.stderr)
            return 2
        job = load_job(args.job, args.overrides)
        if not job.code_path.is_dir():
            print(f"code directory {job.code_path} does not exist; fix `code` in the job file", file=sys.stderr)
            return 2
        shipping.stage(job, dest, [ModelartsProvider.node_platform()])
    except CloudtrainError as exc:
        print(f"cloudtrain: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"staged {job.code_path} with the launcher in {dest}; copy it to OBS and set "
          f"providers.modelarts.code_dir to the copy (its last path part must stay {dest.name!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
