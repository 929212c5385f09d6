"""“Did you mean …?” for a misspelt name (a field, a provider, a command)."""
from __future__ import annotations

import difflib
from typing import Iterable, Optional, Sequence


def nearest(word: str, choices: Iterable[str]) -> Optional[str]:
    """The choice closest to ``word``, if one is close enough to be a likely typo."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` or ``""`` when no choice is close."""
    match = nearest(word, choices)
    return f"; did you mean {match!r}?" if match else ""


# -- habits of SkyPilot and TorchX users ---------------------------------------------------------
# Their words for cloudtrain's commands.  SkyPilot's CLI: `sky launch`, `sky exec`, `sky check`,
# `sky status`, `sky queue`, `sky logs`, `sky cancel`, `sky down`, `sky show-gpus`
# (docs.skypilot.co, "CLI reference"); TorchX's: `torchx run`, `torchx status`, `torchx describe`,
# `torchx log`, `torchx list`, `torchx cancel` (pytorch.org/torchx, "CLI").  `launch` is cloudtrain's
# in-node launcher, so `cloudtrain launch job.yaml` is answered where the launcher starts (cli.main).
COMMAND_HABITS = {
    "run": "submit", "up": "submit",  # (`sky exec task.yaml`: cloudtrain's exec says so, commands/execcmd.py)
    "check": "doctor",
    "jobs": "list", "queue": "list", "ps": "list",
    "describe": "status",
    "log": "logs",
    "down": "cancel", "stop": "cancel", "kill": "cancel",
    "show-gpus": "resources",
}
# what the cloudtrain command takes after its name, shown in the hint
_COMMAND_ARGS = {"submit": "JOB.yaml", "status": "HANDLE", "logs": "HANDLE", "cancel": "HANDLE", "doctor": "",
                 "list": "", "resources": "-p PROVIDER"}


def command_habit(word: str, rest: Sequence[str] = ()) -> str:
    """``"; did you mean `cloudtrain submit job.yaml`?"`` for another tool's command word, else ``""``.
    ``rest``: the words typed after it (a job file or a handle is shown in place of the placeholder)."""
    ours = COMMAND_HABITS.get(word)
    if ours is None:
        return ""
    given = next((w for w in rest if not w.startswith("-")), None)
    shown = given if given is not None and _COMMAND_ARGS.get(ours) else _COMMAND_ARGS.get(ours, "")
    return f"; did you mean `{' '.join(['cloudtrain', ours, *([shown] if shown else [])])}`?"


# Their job files' words for cloudtrain's fields.  SkyPilot's task YAML (docs.skypilot.co,
# "YAML configuration": num_nodes, run, setup, workdir, envs, file_mounts, resources.accelerators
# ("A100:8"), resources.cloud, resources.use_spot, resources.image_id); TorchX's and torchrun's
# options (--nnodes, --nproc_per_node, entrypoint).  Each: the field to write instead.
FIELD_HABITS = {
    "num_nodes": "distribution.nodes", "nnodes": "distribution.nodes",
    "nproc_per_node": "distribution.procs_per_node",
    "run": "command", "entrypoint": "command",
    "workdir": "code",
    "envs": "env",
    "file_mounts": "storage.inputs",
    "use_spot": "spot",
    "image_id": "image",
    "setup": "setup",  # only reached where setup is not a field: anywhere but the top level
}


def field_habit(loc: Sequence[object], value: object = None) -> str:
    """The pointer for a field written in another tool's words (``loc``: its path in the job file,
    ``value``: what was written there), e.g. ``"; did you mean 'distribution.nodes'?"`` for ``num_nodes``;
    ``""`` when the word is no such habit.  Provider sections (``providers.*``) have their own names."""
    if not loc or not isinstance(loc[-1], str) or loc[0] == "providers":
        return ""
    word = loc[-1]
    if word == "accelerators":
        name, sep, count = str(value).partition(":") if isinstance(value, str) else ("A100", ":", "8")
        if not (sep and count.strip().isdigit()):
            name, count = (name or "A100"), "1"
        return (f"; write the accelerator and the count apart: resources.accelerator: {name.strip()} and "
                f"resources.gpus_per_node: {count.strip()}")
    if word in ("cloud", "cloud_provider", "provider", "scheduler"):
        return ("; the platform is not a job field: name it on the command line (cloudtrain submit -p PROVIDER "
                "job.yaml) or as the default (cloudtrain config set provider=PROVIDER)")
    ours = FIELD_HABITS.get(word)
    if ours is None or (word == "setup" and len(loc) == 1):
        return ""
    where = "the top-level 'setup'" if word == "setup" else repr(ours)
    return f"; did you mean {where}?"


# -- a value of the wrong type ------------------------------------------------------------------
_TYPE_WORDS = {"int_type": "a whole number", "bool_type": "true or false", "float_type": "a number"}
# YAML 1.1's words for true and false (yaml.org/type/bool.html), as a quoted string may hold them
_YAML_BOOLS = {"y", "yes", "n", "no", "true", "false", "on", "off"}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def wrong_type(kind: str, got: object, written: Optional[str] = None) -> str:
    """``must be a whole number, got 'yes' (YAML reads it as true)`` for a strict field given another
    type (``kind``: pydantic's error type, ``written``: the scalar as the file had it), else ``""``.
    A job file's field takes its own type: no ``yes`` for 1, no ``"no"`` for false (issue 44)."""
    want = _TYPE_WORDS.get(kind)
    if want is None:
        return ""
    if isinstance(got, bool):
        shown = repr(written) if written is not None else str(got).lower()
        why = f" (YAML reads {written} as {str(got).lower()})" if written is not None else ""
        return f"must be {want}, got {shown}{why}"
    if isinstance(got, str) and kind == "bool_type" and got.strip().lower() in _YAML_BOOLS:
        return f"must be {want}, got the text {got!r}; write true or false, without quotes"
    if isinstance(got, str) and kind != "bool_type" and _is_number(got):
        return f"must be {want}, got the text {got!r}; write the number without quotes"
    return f"must be {want}, got {got!r}"
