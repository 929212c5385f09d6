"""cloudtrain: one provider-neutral job file for distributed training, a plugin per platform.

Names are loaded lazily (PEP 562), so ``import cloudtrain`` stays cheap and ``python -m
cloudtrain.launch`` (standard library only, Python >= 3.8) does not pull pydantic in.

    import cloudtrain
    job = cloudtrain.load_job("job.yaml", overrides={"distribution.nodes": 4}, provider="azure")
    print(cloudtrain.render(job, provider="azure").to_yaml())   # with azure's settings (config.yaml)
    run = cloudtrain.submit(job, provider="local")
    run.wait(); print(run.status(), run.logs())
"""
from __future__ import annotations

__version__ = "0.1.0"

_API = {
    "load_job": "api", "render": "api", "submit": "api", "validate": "api", "attach": "api",
    "status": "api", "cancel": "api", "list_jobs": "api", "jobs": "api", "stage": "api",
    "JobSpec": "spec.job", "Provider": "providers.provider", "Rendered": "providers.provider", "Artifact": "providers.provider",
    "Run": "providers.provider", "JobStatus": "providers.provider", "State": "spec.states", "Cluster": "providers.provider",
    "hookimpl": "extend.hookspecs", "CloudtrainError": "spec.errors", "BadInput": "spec.errors", "PlatformError": "spec.errors",
}
__all__ = sorted(_API)


def __getattr__(name):
    module = _API.get(name)
    if module is None:
        raise AttributeError("module 'cloudtrain' has no attribute %r" % name)
    import importlib

    value = getattr(importlib.import_module("cloudtrain." + module), name)
    globals()[name] = value
    return value
