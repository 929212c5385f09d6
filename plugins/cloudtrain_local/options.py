"""The ``local`` provider's settings (``providers.local`` of a job file, config.yaml, a profile)."""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from cloudtrain.spec.ports import MasterPort


class LocalOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    emulate: Optional[str] = Field(None,
                                   description="inject this provider's node environment instead of the generic one")
    master_port: Optional[MasterPort] = Field(None, description="fixed master port (default: a free one)")
    copy_code: bool = Field(True, description="give every node its own copy of `code` (False: run in place)")
    python: Optional[str] = Field(None, description="interpreter for `cloudtrain launch` (default: this one)")
    isolate_network: Optional[bool] = Field(
        None, description="run the job in its own network namespace (loopback only, no route out); default: "
                          "for mpi, horovod and ray, whose servers listen on every interface otherwise; "
                          "false runs those on the host network anyway")
