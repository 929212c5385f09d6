"""The master port every provider's options take, as one type: a port a user may bind without
privileges (>= 1024), with room above it for the ports a job binds next to it (the liveness port
at +1, one port per ps-worker task from +2)."""
from __future__ import annotations

from typing import Annotated

from pydantic import Field

LOWEST_MASTER_PORT = 1024
HIGHEST_MASTER_PORT = 65000

MasterPort = Annotated[int, Field(ge=LOWEST_MASTER_PORT, le=HIGHEST_MASTER_PORT)]
