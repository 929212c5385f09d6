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

# The public API: what scripts (``load_job`` ... ``stage``) and third-party plugins import, from
# ``cloudtrain`` itself.  The modules behind it (``cloudtrain.spec``, ``cloudtrain.providers``, ...,
# see docs/plugins.md "What a plugin imports") are core's layers and may move; these names stay.
_API = {
    "load_job": "api", "render": "api", "submit": "api", "validate": "api", "attach": "api",
    "status": "api", "cancel": "api", "list_jobs": "api", "jobs": "api", "stage": "api",
    "JobSpec": "spec.job", "State": "spec.states", "job_from_dict": "input.loading",
    "CloudtrainError": "spec.errors", "BadInput": "spec.errors", "PlatformError": "spec.errors",
    "JobFileError": "spec.errors", "JobNotFound": "spec.errors", "MissingExtra": "spec.errors",
    "hookimpl": "extend.hookspecs",
    "ObjectStore": "transfer.objectstore",
    "Provider": "providers.provider", "Run": "providers.provider", "JobStatus": "providers.provider",
    "Cluster": "providers.provider", "CloudProvider": "providers.cloud",
    "Request": "providers.request", "Rendered": "providers.request", "Artifact": "providers.request",
    "CodeUpload": "providers.request", "Placeholder": "providers.request", "ShellText": "providers.request",
    "JsonText": "providers.request", "fill": "providers.request",
    "Pulls": "providers.images",
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
