"""The ``docker`` provider's settings (``providers.docker`` of a job file, config.yaml, a profile)."""
from __future__ import annotations

from typing import List, Optional

from pydantic import BaseModel, ConfigDict, Field

from cloudtrain.spec.ports import MasterPort


class Mount(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    source: str = Field(..., description="host path")
    target: str = Field(..., description="path in the container")
    read_only: bool = Field(True, description="mount read-only")


class DockerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    image: Optional[str] = Field(None, description="image for every node (default: the job's image)")
    emulate: Optional[str] = Field(None,
                                   description="inject this provider's node environment instead of the generic one")
    master_port: MasterPort = Field(29500, description="the master's port inside the network")
    python: str = Field("python3", description="the image's Python, which runs `cloudtrain launch`")
    workdir: str = Field("/workspace", description="where each node's copy of `code` is mounted")
    internal_network: bool = Field(True, description="the job's network has no route out of this machine")
    ssh: Optional[bool] = Field(None, description="per-job ssh keys and sshd for mpirun between nodes "
                                                  "(default: on for mpi/horovod with more than one node)")
    shm_gb: float = Field(1.0, gt=0, description="/dev/shm size when the job does not set resources.shm_gb")
    mounts: List[Mount] = Field(default_factory=list, description="extra bind mounts")
