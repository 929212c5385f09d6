"""``cloudtrain init [SCRIPT] [--name NAME]``: a starter ``job.yaml`` for the current directory,
with the training script found there (``train.py``, ``main.py``, else the one Python file that
looks like an entry point) and the distribution type its imports suggest.  It never overwrites:
an existing ``job.yaml`` is left as it is (exit 2)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional

JOB_FILE = "job.yaml"
PREFERRED = ("train.py", "main.py", "run.py", "finetune.py", "pretrain.py")
ENTRY = re.compile(r"""^if\s+__name__\s*==\s*["']__main__["']\s*:""", re.M)
# what a script's imports say about how it is launched (first match wins)
KINDS = (("horovod", "horovod"), ("deepspeed", "deepspeed"), ("ray", "ray"), ("mpi4py", "mpi"),
         ("torch", "ddp"))


def add_parser(sub) -> None:
    p = sub.add_parser("init", help="write a starter job.yaml for this directory (never overwrites)")
    p.add_argument("script", nargs="?", help="the training script (default: detected: train.py, main.py, ...)")
    p.add_argument("--name", help="the job's name (default: this directory's name)")


def job_name(directory: Path) -> str:
    """The directory's name as a job name: lowercase letters, digits and '-', at most 63."""
    name = re.sub(r"[^a-z0-9-]+", "-", directory.name.lower()).strip("-")[:63].strip("-")
    return name or "train"


def detect_script(directory: Path) -> Optional[str]:
    for name in PREFERRED:
        if (directory / name).is_file():
            return name
    candidates = sorted(p for p in directory.glob("*.py") if p.is_file() and not p.name.startswith(("test_", "setup")))
    entries = [p for p in candidates if ENTRY.search(_read(p))]
    if len(entries) == 1:
        return entries[0].name
    trains = [p for p in candidates if "train" in p.name]
    if len(trains) == 1:
        return trains[0].name
    return candidates[0].name if len(candidates) == 1 else None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:200_000]
    except OSError:
        return ""


def distribution_type(script: Optional[Path]) -> str:
    text = _read(script) if script else ""
    for module, kind in KINDS:
        if re.search(rf"^\s*(?:import|from)\s+{module}\b", text, re.M):
            return kind
    return "ddp" if not text or "torch" in text else "none"


def starter(name: str, script: str, kind: str, requirements: bool) -> str:
    lines: List[str] = [
        "# Made by `cloudtrain init`. Every field: the docs' \"The job file\" page, or `cloudtrain schema`.",
        "# Try it here:        cloudtrain submit job.yaml",
        "# On a platform:      cloudtrain validate -p sagemaker job.yaml   (then submit -p sagemaker)",
        f"name: {name}",
        "code: .                          # shipped to every node",
        f"command: python {script}" if " " not in script else f"command: [python, {script!r}]",
        "distribution:",
        f"  type: {kind}                      # ddp | mpi | horovod | deepspeed | ps-worker | ray | none",
        "  nodes: 1",
        "  procs_per_node: 1",
        "resources:",
        "  gpus_per_node: 0               # and e.g. accelerator: A100 on a cloud",
        'env: {OMP_NUM_THREADS: "1"}',
    ]
    if requirements:
        lines.insert(6, "setup: pip install -r requirements.txt   # on every node, before the launcher")
    else:
        lines.insert(6, "# setup: pip install -r requirements.txt   # on every node, before the launcher")
    lines.insert(6, "# image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime   # docker and the container platforms")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    from ..spec.errors import BadInput
    directory = Path.cwd()
    target = directory / JOB_FILE
    if target.exists() or target.is_symlink():
        raise BadInput(f"{target} exists; cloudtrain init never overwrites a job file: edit it, or run init in "
                       "another directory")
    script = args.script or detect_script(directory)
    if script is None:
        raise BadInput(f"no training script found in {directory} (looked for {', '.join(PREFERRED)}, or one *.py "
                       "with `if __name__ == \"__main__\":`); name it: cloudtrain init SCRIPT.py")
    if not (directory / script).is_file():
        raise BadInput(f"{script}: no such file in {directory}; name a script of this directory")
    name = args.name or job_name(directory)
    kind = distribution_type(directory / script)
    text = starter(name, script, kind, (directory / "requirements.txt").is_file())
    from ..input.loading import job_from_dict, parse_yaml
    doc = parse_yaml(text, str(target))
    job_from_dict(doc.data, path=target, lines=doc.lines)  # --name's problems, at their line, before writing
    with open(target, "x", encoding="utf-8") as f:  # "x": a file made meanwhile is not overwritten either
        f.write(text)
    print(f"wrote {target} (script: {script}, distribution: {kind}); try it: cloudtrain submit {JOB_FILE}")
    return 0
