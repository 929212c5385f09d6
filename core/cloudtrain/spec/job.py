"""The provider-neutral job: ``JobSpec`` and its parts (pydantic v2).

A provider's own options live under ``providers.<name>`` and are validated by that
provider's ``Options`` model (see ``cloudtrain.providers.provider``).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, StrictBool, StrictFloat, StrictInt, field_validator,
                      model_validator)

from .credentials import shown_value
from .durations import OptionalDuration, format_duration
from .errors import JobFileError



NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class DistributionType(str, Enum):
    ddp = "ddp"
    mpi = "mpi"
    horovod = "horovod"
    deepspeed = "deepspeed"
    ps_worker = "ps-worker"
    ray = "ray"
    none = "none"


class Strict(BaseModel):
    # defer_build: a model's validator is built on its first use, not at import: a command
    # validates a job through ``JobSpec`` alone (its parts' schemas are built inline there)
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=True, defer_build=True)


class Distribution(Strict):
    """How the job is spread over nodes and processes."""

    # the default stays the plain string: pydantic does not validate defaults and dumps it as it is (a str enum
    # compares equal to it)
    type: DistributionType = Field("ddp",  # type: ignore[assignment]
                                   description="ddp | mpi | horovod | deepspeed | ps-worker | ray | none")
    nodes: StrictInt = Field(1, ge=1, description="number of nodes (machines, containers, pods)")
    min_nodes: Optional[StrictInt] = Field(None, ge=1,
                                           description="elastic: the job may start with this many nodes (ddp)")
    procs_per_node: Optional[StrictInt] = Field(None, ge=1,
                                          description="processes per node; default: gpus_per_node, or 1 without GPUs")
    ps: Optional[StrictInt] = Field(None, ge=1,
                              description="ps-worker only: parameter-server nodes (the other nodes are workers)")

    @model_validator(mode="after")
    def _check(self) -> "Distribution":
        if self.type == "ps-worker":
            ps = self.ps or 1
            if ps >= self.nodes:
                raise ValueError(f"ps-worker needs at least one worker: ps ({ps}) must be < nodes ({self.nodes})")
        elif self.ps is not None:
            raise ValueError("ps is only for type ps-worker")
        if self.min_nodes is not None and self.min_nodes > self.nodes:
            raise ValueError(f"min_nodes ({self.min_nodes}) must be <= nodes ({self.nodes})")
        return self


class Resources(Strict):
    """What each node needs."""

    gpus_per_node: StrictInt = Field(0, ge=0,
                                     description="GPUs (or NPUs) per node; also the default processes per node")
    accelerator: Optional[str] = Field(None, description="neutral accelerator name, e.g. A100, A100-80GB, H100, L4, "
                                                         "Ascend-910B; each provider picks its instance type from its "
                                                         "catalog (cloudtrain resources lists them)")
    instance_type: Optional[str] = Field(None, description="an instance type of one platform (e.g. p4d.24xlarge); used "
                                                           "where that platform's catalog knows it, elsewhere its "
                                                           "accelerator and count are resolved")
    cpus_per_node: Optional[StrictFloat] = Field(None, gt=0, description="CPU cores per node (containers: a limit; "
                                                                   "instances: a minimum when choosing one)")
    memory_gb: Optional[StrictFloat] = Field(None, gt=0, description="memory per node in GiB (containers: a limit; "
                                                               "instances: a minimum when choosing one)")
    shm_gb: Optional[StrictFloat] = Field(None, gt=0, description="shared memory (/dev/shm) per node in GiB")

    @field_validator("accelerator")
    @classmethod
    def _known_accelerator(cls, v):
        from .accelerators import canonical
        return None if v is None else canonical(str(v))

    @model_validator(mode="after")
    def _counted(self) -> "Resources":
        if self.accelerator and not self.gpus_per_node:
            raise ValueError(f"accelerator {self.accelerator} needs gpus_per_node, how many per node "
                             "(e.g. gpus_per_node: 8)")
        return self


class SecretRef(Strict):
    """Where a secret's value comes from on the submitting machine; it is never stored or printed."""

    from_env: Optional[str] = Field(None, pattern=ENV_NAME_PATTERN,
                                    description="read the value from this environment variable at submit time")
    from_file: Optional[str] = Field(None, description="read the value from this file (relative to the job file)")

    @model_validator(mode="after")
    def _one_source(self) -> "SecretRef":
        if (self.from_env is None) == (self.from_file is None):
            raise ValueError("give exactly one of from_env or from_file")
        return self


class Network(Strict):
    """Fast-network settings; each provider maps them to its platform's presets."""

    # a bare `on`/`off` in the job file is taken as written, not as YAML 1.1's boolean
    rdma: Literal["auto", "on", "off"] = Field("auto", description="RDMA / InfiniBand / EFA presets per provider")


class Storage(Strict):
    """Where the training data is, where outputs go and where checkpoints are kept, the same
    for every provider; each maps them natively (the storage table in docs/job-file.md)."""

    inputs: Dict[str, str] = Field(default_factory=dict, description="name -> URI of the training data (s3://, pvc://, "
                                                                     "a host path or file:// ...); every node sees "
                                                                     "CLOUDTRAIN_INPUT_<NAME>, a local path")
    output: Optional[str] = Field(None, min_length=1, description="URI the job's CLOUDTRAIN_OUTPUT_DIR ends up in "
                                                                  "(cloudtrain outputs HANDLE downloads it)")
    checkpoint: Optional[str] = Field(
        None, min_length=1,
        description="where checkpoints are kept across restarts (s3://, azureml://, pvc://, cos://, obs://, "
                    "or a local path / file:// URI for local and docker); nodes see CLOUDTRAIN_CHECKPOINT_DIR")

    @field_validator("inputs")
    @classmethod
    def _input_names(cls, v):
        import re
        for name, uri in v.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,62}", name):
                raise ValueError(f"input name {name!r} must be lowercase letters, digits and '_' (it becomes "
                                 f"CLOUDTRAIN_INPUT_{name.upper()})")
            if not isinstance(uri, str) or not uri.strip():
                raise ValueError(f"input {name} needs a URI or path")
        return v


RestartKind = Literal["preemption", "capacity", "node-failure", "hang"]
# restart_on's default: every failure that is not the user's code's own (docs/controller.md)
DEFAULT_RESTART_ON: tuple = ("preemption", "capacity", "node-failure", "hang")


class ExitCodes(Strict):
    """``restart_on: [{exit-codes: [3, 75]}]``: the user's code exiting with one of these is restarted too."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    exit_codes: List[StrictInt] = Field(..., alias="exit-codes", min_length=1,
                                  description="exit codes of the user's code that restart the job (1-255)")

    @field_validator("exit_codes")
    @classmethod
    def _codes(cls, v):
        bad = [c for c in v if not 1 <= c <= 255]
        if bad:
            raise ValueError(f"exit codes are 1-255 (0 is success): {bad}")
        return v


@dataclass(frozen=True)
class Budget:
    """``max_cost`` read: an amount and its currency (None: the catalog's of the provider)."""

    amount: float
    currency: Optional[str]

    @property
    def text(self) -> Union[float, str]:
        return self.amount if self.currency is None else f"{self.amount:g} {self.currency}"

    def shown(self, fallback: str = "") -> str:
        return f"{self.amount:g} {self.currency or fallback}".strip()


BUDGET_HINT = "write a number (the catalog's currency) or an amount and a currency: 500, '500 USD', '3000 CNY'"


def parse_budget(value: Any) -> Budget:
    """``500`` / ``"500 USD"`` / ``"3000 CNY"`` -> ``Budget``."""
    import re
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an amount; {BUDGET_HINT}")
    if isinstance(value, (int, float)):
        amount, currency = float(value), None
    elif isinstance(value, str):
        found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]{3})?\s*", value)
        if not found:
            raise ValueError(f"{value!r} is not an amount; {BUDGET_HINT}")
        amount, currency = float(found.group(1)), (found.group(2) or "").upper() or None
    else:
        raise ValueError(f"{value!r} is not an amount; {BUDGET_HINT}")
    if amount <= 0:
        raise ValueError(f"{value!r} must be more than 0; {BUDGET_HINT}")
    return Budget(amount, currency)


class JobSpec(Strict):
    """A distributed training job, the same for every provider."""

    name: str = Field(..., pattern=NAME_PATTERN, description="lowercase letters, digits, '-'; at most 63 characters")
    code: Optional[str] = Field(".", description="directory shipped to every node (relative to the job file; "
                                                 "from --set: to the current directory); null: the image already "
                                                 "holds the code, nothing is shipped")
    command: Union[str, List[str]] = Field(..., description="what every node runs (through cloudtrain launch): a list "
                                          "of words, or a string split into words as a shell would (no shell runs "
                                          "it: shell syntax is refused; [bash, -c, '...'] asks for one)")
    image: Optional[str] = Field(None, description="container image, for container-based providers")
    setup: Optional[str] = Field(None, min_length=1,
                                 description="a shell command run once on every node, after the code arrives and "
                                             "before the launcher (e.g. pip install -r requirements.txt); its output "
                                             "is in the node's log and its failure fails the node")
    distribution: Distribution = Field(default_factory=Distribution)
    resources: Resources = Field(default_factory=Resources)
    env: Dict[str, str] = Field(default_factory=dict,
                                description="environment variables of every node (values become strings)")
    secrets: Dict[str, SecretRef] = Field(default_factory=dict,
                                          description="variables whose values are never printed, logged or rendered")
    network: Network = Field(default_factory=Network, description="RDMA / InfiniBand / EFA")
    storage: Storage = Field(default_factory=Storage,
                             description="training data (inputs), where outputs go, checkpoints kept across restarts")
    spot: StrictBool = Field(False, description="preemptible (spot) capacity where the platform offers it")
    max_runtime: OptionalDuration = Field(None, description="hard limit on the run time: 90s, 30m, 8h, 2d or 1h30m "
                                                            "(a bare number is seconds); the job fails when it is "
                                                            "reached")
    max_restarts: StrictInt = Field(0, ge=0, description="restart the whole job (every node) this many times after a "
                                                   "failure or a preemption")
    max_hourly_cost: Optional[StrictFloat] = Field(None, gt=0, description="refuse the job when its estimate "
                                                   "(nodes x the instance's rate per hour, in the catalog's currency) "
                                                   "is above this")
    restart_on: List[Union[RestartKind, ExitCodes]] = Field(
        default_factory=lambda: list(DEFAULT_RESTART_ON),
        description="which failures max_restarts covers: preemption, capacity, node-failure, hang, and "
                    "{exit-codes: [..]} of your own; default: the four kinds (an exit of your code is not restarted)")
    stall_timeout: OptionalDuration = Field(None, description="end the attempt when rank 0 printed nothing for this "
                                                              "long (30m, 2h): every rank's Python stack goes to the "
                                                              "log first, and the attempt counts as a hang")
    max_cost: Optional[Union[float, str]] = Field(
        None, description="budget of the whole job, every attempt: 500 (the catalog's currency), '500 USD' or "
                          "'3000 CNY'; warned at 80 %, cancelled when reached (needs a known rate)")
    providers: Dict[str, Dict[str, Any]] = Field(default_factory=dict, description="each provider's own options")

    _source: Optional["Source"] = PrivateAttr(default=None)

    @field_validator("command")
    @classmethod
    def _command_not_empty(cls, v):
        if (isinstance(v, str) and not v.strip()) or (isinstance(v, list) and not v):
            raise ValueError("must not be empty")
        if isinstance(v, str):  # split into words, never run by a shell: shell syntax would mis-run
            from .shellwords import refusal, shell_syntax
            construct = shell_syntax(v)
            if construct is not None:
                raise ValueError(refusal(v, construct))
        return v

    @field_validator("env", mode="before")
    @classmethod
    def _env_scalars(cls, v):
        if isinstance(v, dict):
            out = {}
            for key, value in v.items():
                if isinstance(value, bool):
                    value = "true" if value else "false"
                if isinstance(value, (int, float)):
                    value = str(value)
                out[key] = value
            return out
        return v

    @field_validator("env", "secrets")
    @classmethod
    def _env_names(cls, v):
        import re
        for key in v:
            if not re.match(ENV_NAME_PATTERN, key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
        return v

    @field_validator("max_cost", mode="before")
    @classmethod
    def _budget(cls, v):
        return None if v is None else parse_budget(v).text

    @field_validator("restart_on")
    @classmethod
    def _restart_kinds_once(cls, v):
        kinds = [k for k in v if isinstance(k, str)]
        if len(set(kinds)) != len(kinds):
            raise ValueError("name each kind once")
        return v

    @model_validator(mode="after")
    def _stall_watched(self) -> "JobSpec":
        if self.stall_timeout is not None and self.distribution.type != "ddp":
            raise ValueError(f"stall_timeout: the launcher watches torchrun's output (ddp) only, not "
                             f"{self.distribution.type}'s; drop stall_timeout for this job")
        return self

    @field_validator("env")
    @classmethod
    def _mca_values(cls, v):
        """An MCA setting reaches the other nodes' shells through Open MPI's ssh launcher
        (``cloudtrain.launch.plans.check_mca``, which refuses it on the node): refused here too."""
        from ..launch.plans import MCA_PREFIXES, REMOTE_SHELL_CHARACTERS
        for key, value in v.items():
            if key.startswith(MCA_PREFIXES) and REMOTE_SHELL_CHARACTERS.intersection(value):
                raise ValueError(f"{key}: Open MPI passes MCA settings to the other nodes' shells inside double "
                                 "quotes, where $ ` \" \\ ! and line breaks are code; remove them from the value")
        return v

    @model_validator(mode="after")
    def _no_overlap(self) -> "JobSpec":
        both = sorted(set(self.env) & set(self.secrets))
        if both:
            raise ValueError(f"{', '.join(both)} is both in env and in secrets; keep it in secrets only")
        return self

    # -- derived facts every provider uses --------------------------------------------
    @property
    def argv(self) -> List[str]:
        return shlex.split(self.command) if isinstance(self.command, str) else list(self.command)

    @property
    def command_line(self) -> str:
        return self.command if isinstance(self.command, str) else shlex.join(self.command)

    @property
    def procs_per_node(self) -> int:
        d = self.distribution
        return d.procs_per_node or self.resources.gpus_per_node or 1

    @property
    def max_runtime_text(self) -> Optional[str]:
        """``max_runtime`` as a person would write it (``8h``, ``1h30m``), None without one."""
        return None if self.max_runtime is None else format_duration(self.max_runtime)

    @property
    def budget(self) -> Optional[Budget]:
        """``max_cost`` as an amount and a currency (None: no budget)."""
        return None if self.max_cost is None else parse_budget(self.max_cost)

    @property
    def restart_exit_codes(self) -> List[int]:
        """The exit codes ``restart_on`` names (``{exit-codes: [..]}``)."""
        return sorted({c for k in self.restart_on if isinstance(k, ExitCodes) for c in k.exit_codes})

    @property
    def ps(self) -> int:
        return self.distribution.ps or 1

    @property
    def code_path(self) -> Optional[Path]:
        """The code directory as an absolute path: relative to the job file, or to the current
        directory when ``--set code=...`` gave it (or there is no file); None with ``code: null``."""
        if self.code is None:
            return None
        source = self._source
        if source is not None and source.path is not None and source.override_of(("code",)) is None:
            base = source.path.parent  # from the file
        else:
            base = Path.cwd()
        return (base / self.code).resolve()

    @property
    def source(self) -> Optional["Source"]:
        return self._source

    def launch_args(self) -> List[str]:
        """``cloudtrain launch`` options that carry the job's launch settings to every node.

        ``max_restarts`` is not among them: providers restart the whole job (every node), which
        works for every distribution type; torchrun's in-place elastic restarts hang with
        torch 2.13 + gloo (workers of the next attempt read the previous attempt's store keys).
        """
        args = ["--type", self.distribution.type, "--nproc-per-node", str(self.procs_per_node)]
        if self.distribution.type == "ps-worker":
            args += ["--ps", str(self.ps)]
        if self.distribution.min_nodes is not None and self.distribution.min_nodes < self.distribution.nodes:
            args += ["--min-nodes", str(self.distribution.min_nodes)]
        if self.stall_timeout is not None:  # the launcher watches rank 0's output (launch/stall.py)
            args += ["--stall-timeout", str(self.stall_timeout)]
        if self.setup is not None:  # one argument, whatever it holds: the launcher hands it to sh -c
            args.append("--setup=" + self.setup)
        return args


@dataclass(frozen=True)
class Origin:
    """Where a settings file gave a value: ``path``, its ``lines`` (``{path in that file: line}``)
    and ``prefix``, the place in that file of the section the value came from (e.g.
    ``("profiles", "prod", "providers", "eks")``)."""

    path: Path
    lines: Dict[tuple, int]
    prefix: tuple

    def locate(self, rest: tuple) -> dict:
        inner = self.prefix + tuple(rest)
        line, loc = None, inner
        while loc and line is None:
            line, loc = self.lines.get(loc), loc[:-1]
        return {"file": str(self.path), "line": line, "field": ".".join(map(str, inner))}

    def error(self, message: str, rest: tuple = ()) -> JobFileError:
        return JobFileError(message, **self.locate(rest))


class Source:
    """Where a job came from, to point errors at a file, line and field (or at the ``--set``).

    ``lines``: ``{path: line}``; ``overrides``: ``{"a.b": value}`` of ``--set``, ``raw``: their
    text as given; ``texts``: scalars as written, ``{path: text}`` (see ``yamlio.Document``);
    ``origins``: ``{("providers", NAME, option): Origin}`` for the options a settings file gave
    (``cloudtrain.input.config``)."""

    def __init__(self, path: Optional[Path], lines: Dict[tuple, int], overrides: Dict[str, Any], *,
                 texts: Optional[Dict[tuple, str]] = None, raw: Optional[Dict[str, str]] = None,
                 origins: Optional[Dict[tuple, Origin]] = None):
        self.path, self.lines, self.overrides = path, lines, overrides
        self.texts, self.raw, self.origins = texts or {}, raw or {}, origins or {}

    def line_of(self, loc: tuple) -> Optional[int]:
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), None)

    def overrides_of(self, loc: tuple) -> List[str]:
        """The ``--set`` keys that gave the value at ``loc``, or a part of it."""
        dotted = ".".join(str(p) for p in loc)
        return [key for key in self.overrides
                if dotted == key or dotted.startswith(key + ".") or key.startswith(dotted + ".")]

    def override_of(self, loc: tuple) -> Optional[str]:
        keys = self.overrides_of(loc)
        return keys[0] if keys else None

    def origin_of(self, loc: tuple) -> Optional[Origin]:
        """The settings file that gave the option at ``loc`` (None: the job file, or nobody)."""
        return self.origins.get(tuple(loc[:3])) if len(loc) >= 3 else None

    def locate(self, loc: tuple) -> dict:
        """``file``, ``line`` and ``field`` of the value at ``loc`` for a ``JobFileError``: the
        ``--set`` that gave it (each one, when several gave parts of it), the settings file and
        line that gave it, or the job file's line."""
        loc = tuple(loc)
        field = ".".join(str(p) for p in loc) or None
        keys = self.overrides_of(loc)
        if keys:
            given = " ".join(f"--set {key}"
                             + ("" if self.raw.get(key) is None else f"={shown_value(key, self.raw[key])}")
                             for key in keys)
            return {"file": given, "line": None, "field": field}
        origin = self.origin_of(loc)
        if origin is not None:
            return origin.locate(loc[2:])
        return {"file": str(self.path) if self.path else None, "line": self.line_of(loc), "field": field}

    def error(self, message: str, loc: tuple = ()) -> JobFileError:
        """A problem with the value at ``loc``, at the place ``locate`` finds."""
        return JobFileError(message, **self.locate(loc))
