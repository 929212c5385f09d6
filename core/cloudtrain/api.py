"""The Python API for orchestration scripts (what the CLI calls too)."""
from __future__ import annotations

import os
from typing import Any, Iterable, List, Mapping, Optional, Union

from .errors import BadInput
from .job import JobSpec
from .loading import load_job as _load_job
from .plugins import get_provider
from .provider import JobStatus, Provider, Rendered, Run, parse_handle

DEFAULT_PROVIDER = "local"


def load_job(path, overrides: Optional[Union[Mapping[str, Any], Iterable[str]]] = None) -> JobSpec:
    """Read and validate ``job.yaml``; ``overrides`` like ``{"distribution.nodes": 4}``."""
    return _load_job(path, overrides)


JobLike = Union[JobSpec, str, "os.PathLike[str]"]


def as_job(job, what: str = "job") -> JobSpec:
    """A ``JobSpec`` as given, or read from the job file a path names."""
    if isinstance(job, JobSpec):
        return job
    if isinstance(job, (str, os.PathLike)):
        return _load_job(job)
    raise BadInput(f"{what}: expected a JobSpec or the path of a job file, got {type(job).__name__}; "
                   "e.g. cloudtrain.render('job.yaml', provider='local')")


def _provider(provider: Union[str, Provider, None]) -> Provider:
    if isinstance(provider, Provider):
        return provider
    return get_provider(provider or DEFAULT_PROVIDER)


def render(job: JobLike, provider: Union[str, Provider, None] = None) -> Rendered:
    """The exact request ``provider`` would send for ``job`` (a ``JobSpec`` or a job file's path;
    pure: nothing is sent)."""
    return _provider(provider).render(as_job(job, "render"))


def validate(job: JobLike, provider: Union[str, Provider, None] = None):
    """Check the job and the provider's options; raises ``BadInput``; returns the options."""
    return _provider(provider).validate(as_job(job, "validate"))


def submit(job: Union[JobLike, Rendered], provider: Union[str, Provider, None] = None,
           secrets: Optional[Mapping[str, str]] = None) -> Run:
    """Render and send the job (a ``JobSpec``, a job file's path, or a ``Rendered`` request);
    returns a ``Run`` (``status()``, ``logs()``, ``wait()``, ``cancel()``).  A request rendered
    for one provider is refused by another."""
    if isinstance(job, Rendered):
        if provider is None:
            provider = job.provider
    else:
        job = as_job(job, "submit")
    return _provider(provider).submit(job, secrets=secrets)


def attach(handle: str) -> Run:
    """A ``Run`` for an existing job handle ``PROVIDER://ID``."""
    name, job_id = parse_handle(handle)
    return Run(get_provider(name), job_id)


def status(handle: str) -> JobStatus:
    return attach(handle).status()


def cancel(handle: str) -> JobStatus:
    return attach(handle).cancel()


def list_jobs(provider: Optional[str] = None, on_error=None) -> List[JobStatus]:
    """Jobs of one provider, or of every provider that keeps its jobs on this machine (local,
    docker: no network call); ``on_error(name, exc)`` is told of a provider that cannot list
    (SDK missing, platform unreachable) and the others go on."""
    from .errors import CloudtrainError
    from .plugins import get_provider_class, providers
    names = [provider] if provider else [n for n in providers() if get_provider_class(n).local_state]
    out: List[JobStatus] = []
    for name in names:
        try:
            out.extend(get_provider(name).list())
        except CloudtrainError as exc:
            if on_error is None:
                raise
            on_error(name, exc)
    return out
