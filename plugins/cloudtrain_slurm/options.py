"""The ``providers.slurm`` section of a job file."""
from __future__ import annotations

import re
from typing import List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

# What a partition, account, QoS or constraint may hold on an #SBATCH line: Slurm's names are
# letters, digits and these; anything else (a space, a quote, a newline) would change the line.
SLURM_NAME = re.compile(r"^[A-Za-z0-9_.:@+-]+(,[A-Za-z0-9_.:@+-]+)*$")
# ``user@host`` or ``host`` (or an alias of the user's ssh config); never an ssh option (``-o...``).
LOGIN = re.compile(r"^([A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9._:-]*$")
# A workdir reaches #SBATCH --output (where % is Slurm's pattern character) and every node's shell.
UNSAFE_PATH = re.compile(r"[\s%'\"\\`$#;&|<>(){}*?!\[\]]")


def _slurm_name(value: Optional[str]) -> Optional[str]:
    if value is not None and not SLURM_NAME.match(value):
        raise ValueError(f"{value!r} is not a Slurm name (letters, digits, _ . : @ + -, comma-separated)")
    return value


class SlurmOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    login: Optional[str] = Field(None, description="user@host of a login node: Slurm's commands run there over the "
                                                   "system ssh (your ssh config and keys; one connection reused for a "
                                                   "burst of commands). Unset: they run on this machine")
    workdir: str = Field("cloudtrain-jobs", description="a directory on the cluster's shared file system (relative: "
                                                        "under your home there) that holds the code archives, the "
                                                        "batch scripts, the jobs' logs and their directories")
    partition: Optional[str] = Field(None, description="#SBATCH --partition (default: the cluster's default)")
    account: Optional[str] = Field(None, description="#SBATCH --account")
    qos: Optional[str] = Field(None, description="#SBATCH --qos")
    constraint: Optional[str] = Field(None, description="#SBATCH --constraint (node features, e.g. a100)")
    spot_partition: Optional[str] = Field(None, description="spot: true runs in this preemptible partition")
    spot_qos: Optional[str] = Field(None, description="spot: true runs with this preemptible QoS")
    exclusive: bool = Field(False, description="#SBATCH --exclusive: no other job shares the nodes")
    gpu_type: Optional[str] = Field(None, description="the GRES type of the GPUs, e.g. a100 (--gpus-per-node=a100:8); "
                                                      "default: any type")
    containers: Optional[Literal["pyxis", "apptainer"]] = Field(
        None, description="how the job's image runs: pyxis (srun --container-image, NVIDIA's enroot) or apptainer "
                          "(apptainer exec docker://IMAGE). Unset: the image is not used; the nodes run in the "
                          "environment sbatch gives them (the submitting shell's), with prelude and setup")
    prelude: List[str] = Field(default_factory=list,
                               description="shell lines each node runs before the launcher, e.g. module load "
                                           "cuda/12.1, source ~/venv/bin/activate")
    python: str = Field("python3", description="the nodes' Python (3.8+), which runs `cloudtrain launch`")
    signal_seconds: int = Field(120, ge=10, le=65535, description="with max_restarts: seconds before the time limit "
                                                                  "(or a preemption) the job's processes get SIGTERM "
                                                                  "(--signal) to write a checkpoint")
    rate: Optional[float] = Field(None, ge=0, description="what one node costs per hour, for the ledger (a cluster "
                                                          "publishes no price)")
    currency: str = Field("USD", description="the currency of rate")

    _names = field_validator("partition", "account", "qos", "constraint", "spot_partition", "spot_qos",
                             "gpu_type")(_slurm_name)

    @field_validator("login")
    @classmethod
    def _login(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not LOGIN.match(value):
            raise ValueError(f"{value!r} is not user@host or host (no spaces, no ssh options)")
        return value

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str) -> str:
        if not value or value.startswith("-") or UNSAFE_PATH.search(value) or "\0" in value:
            raise ValueError(f"{value!r} must be a plain path: no spaces, quotes, %, $, # or shell characters, "
                             "not starting with -")
        if ".." in value.split("/"):
            raise ValueError(f"{value!r} must not hold '..'")
        return value.rstrip("/") or "/"

    @field_validator("python")
    @classmethod
    def _python(cls, value: str) -> str:
        if not value or value.startswith("-") or UNSAFE_PATH.search(value):
            raise ValueError(f"{value!r} must be a command name or a path, without spaces or shell characters")
        return value
