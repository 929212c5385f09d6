"""The jobs the contract renders and submits (no pytest here)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from cloudtrain.extend import plugins
from cloudtrain.input.loading import job_from_dict

SECRET_VALUE = "s3cr3t-contract-value-7f9a"
SECRET_SOURCE = "CT_CONTRACT_SECRET"


def contract_job(code: Path, **extra: Any):
    """A three-node ddp job with an environment variable and a secret (from ``$CT_CONTRACT_SECRET``)."""
    data: Dict[str, Any] = {
        "name": "contract-job", "command": "python train.py --epochs 1", "image": "example/train:1",
        "distribution": {"type": "ddp", "nodes": 3, "procs_per_node": 2},
        "env": {"OMP_NUM_THREADS": "1"}, "secrets": {"API_TOKEN": {"from_env": SECRET_SOURCE}},
        "code": str(code),
    }
    data.update(extra)
    return job_from_dict(data)


def required_settings(provider: str) -> Dict[str, Any]:
    """The provider's required options, with its own example values (``Provider.required``)."""
    return dict(plugins.get_provider_class(provider).required)
