"""Stage a job's code for TI-ONE: ``python -m cloudtrain_tione.stage JOB.yaml DEST``.

Writes the job's ``code`` directory plus cloudtrain's launcher bundle (with the TI-ONE
detector) to ``DEST`` -- or, with ``--archive``, a reproducible ``.tar.gz`` -- for you to
upload to COS, CFS or GooseFSx (or to copy into an image) and name in
``providers.tione.code_source``.  cloudtrain does not upload it itself: that needs the COS SDK
(cos-python-sdk-v5), which the ``tione`` extra does not carry.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from cloudtrain.errors import CloudtrainError
from cloudtrain.shipping import archive, code_digest, stage

from .detect import PLATFORMS


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cloudtrain_tione.stage", description=__doc__.split("\n\n")[0])
    p.add_argument("job", help="path to job.yaml")
    p.add_argument("dest", help="directory to write (or the .tar.gz file, with --archive)")
    p.add_argument("--archive", action="store_true", help="write a reproducible .tar.gz instead of a directory")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of the job file (repeatable)")
    args = p.parse_args(argv)
    from cloudtrain.api import load_job
    try:
        job = load_job(args.job, args.overrides)
        if not job.code_path.is_dir():
            raise CloudtrainError(f"code directory {job.code_path} does not exist; fix `code` in the job file")
        dest = Path(args.dest)
        if dest.resolve() == job.code_path or job.code_path in dest.resolve().parents:
            raise CloudtrainError(f"{dest} is inside the code directory {job.code_path}; stage it elsewhere")
        if args.archive:
            dest.write_bytes(archive(job, PLATFORMS))
        else:
            if dest.exists() and any(dest.iterdir()):
                raise CloudtrainError(f"{dest} is not empty; give a new or empty directory")
            stage(job, dest, PLATFORMS)
    except CloudtrainError as exc:
        print(f"cloudtrain: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"staged {job.name} (code {code_digest(job)[:12]}) in {dest}")
    print("upload it, e.g.: coscli cp -r %s cos://BUCKET/PATH/   then set providers.tione.code_source: "
          "cos://BUCKET/PATH/" % dest, file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
