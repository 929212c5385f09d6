"""The Python API for orchestration scripts (what the CLI calls too)."""
from __future__ import annotations

import os
from typing import Any, Iterable, List, Mapping, Optional, Union

from .spec.errors import BadInput
from .spec.job import JobSpec
from .input.loading import load_job as _load_job
from .extend.plugins import get_plugin_manager, get_provider
from .providers.provider import JobStatus, Provider, Rendered, Run, parse_handle


def load_job(path, overrides: Optional[Union[Mapping[str, Any], Iterable[str]]] = None, *,
             provider: Optional[str] = None, profile: Optional[str] = None) -> JobSpec:
    """Read and validate ``job.yaml``; ``overrides`` like ``{"distribution.nodes": 4}``.  With
    ``provider``, the settings of the user config and the project file for it (and
    ``profile``'s) go beneath the job file's ``providers.<provider>``."""
    return _load_job(path, overrides, provider=provider, profile=profile)


JobLike = Union[JobSpec, str, "os.PathLike[str]"]


def as_job(job, what: str = "job", provider: Union[str, Provider, None] = None,
           profile: Optional[str] = None) -> JobSpec:
    """A ``JobSpec`` as given, or read from the job file a path names (with the settings of
    ``provider`` and ``profile``)."""
    if isinstance(job, JobSpec):
        return job
    if isinstance(job, (str, os.PathLike)):
        name = provider.name if isinstance(provider, Provider) else (provider or default_provider(job, profile))
        return _load_job(job, provider=name, profile=profile)
    raise BadInput(f"{what}: expected a JobSpec or the path of a job file, got {type(job).__name__}; "
                   "e.g. cloudtrain.render('job.yaml', provider='local')")


def default_provider(job=None, profile: Optional[str] = None) -> str:
    """The provider used when none is named: the settings' (see ``cloudtrain.input.config``), else local."""
    from .input.config import Settings
    path = job if isinstance(job, (str, os.PathLike)) else None
    return Settings.load(path, profile).default_provider()


def _provider(provider: Union[str, Provider, None], job=None, profile: Optional[str] = None) -> Provider:
    if isinstance(provider, Provider):
        return provider
    return get_provider(provider or default_provider(job, profile))


# -- the plugins' hooks fire here, around the provider's calls (as torchx's Runner does) -------------
def policy(job: JobSpec, provider: Provider) -> List[str]:
    """What the plugins' ``cloudtrain_validate_job`` rules find wrong with ``job`` on ``provider``."""
    hook = get_plugin_manager().hook
    return [problem for found in hook.cloudtrain_validate_job(job=job, provider=provider) for problem in found or ()]


def render_with_hooks(provider: Provider, job: JobSpec, *, submit: bool = False) -> Rendered:
    """``provider.render`` with the plugins' rules checked and their amendments made
    (``cloudtrain_amend_request``): what a dry run shows is what a submit sends."""
    rendered = provider.render(job, submit=submit, policy=policy(job, provider))
    get_plugin_manager().hook.cloudtrain_amend_request(rendered=rendered)
    return rendered


def send_with_hooks(provider: Provider, rendered: Rendered, secrets: Optional[Mapping[str, str]] = None) -> Run:
    """``provider.submit`` between the plugins' ``cloudtrain_before_submit`` and
    ``cloudtrain_after_submit`` hooks."""
    hook = get_plugin_manager().hook
    hook.cloudtrain_before_submit(rendered=rendered)
    run = provider.submit(rendered, secrets=secrets)
    hook.cloudtrain_after_submit(rendered=rendered, handle=run.handle)
    return run


def render(job: JobLike, provider: Union[str, Provider, None] = None, *, profile: Optional[str] = None) -> Rendered:
    """The exact request ``provider`` would send for ``job`` (a ``JobSpec`` or a job file's path;
    pure: nothing is sent)."""
    chosen = _provider(provider, job, profile)
    return render_with_hooks(chosen, as_job(job, "render", chosen, profile))


def validate(job: JobLike, provider: Union[str, Provider, None] = None, *, profile: Optional[str] = None):
    """Every check ``submit`` makes before it sends anything (the options, the required
    settings, the code directory, the secrets' sources); raises every problem together
    (``BadInput``); returns the options."""
    chosen = _provider(provider, job, profile)
    job = as_job(job, "validate", chosen, profile)
    return chosen.validate(job, submit=True, policy=policy(job, chosen))


def submit(job: Union[JobLike, Rendered], provider: Union[str, Provider, None] = None,
           secrets: Optional[Mapping[str, str]] = None, *, profile: Optional[str] = None) -> Run:
    """Render and send the job (a ``JobSpec``, a job file's path, or a ``Rendered`` request);
    returns a ``Run`` (``status()``, ``logs()``, ``wait()``, ``cancel()``).  A request rendered
    for one provider is refused by another.  ``provider="sagemaker,azure"`` (or a list) is
    failover (``cloudtrain.orchestrate.failover``): each is rendered first, then tried in order."""
    names = provider if isinstance(provider, (list, tuple)) else (
        provider.split(",") if isinstance(provider, str) and "," in provider else None)
    if names is not None and not isinstance(job, Rendered):
        path = job if isinstance(job, (str, os.PathLike)) else None
        if path is None:
            raise BadInput("failover across providers reads the job file for each provider's settings: give "
                           "submit the job file's path, e.g. cloudtrain.submit('job.yaml', provider='sagemaker,azure')")
        renders = [render_with_hooks(get_provider(n.strip()), _load_job(path, provider=n.strip(), profile=profile),
                                     submit=True) for n in names if n.strip()]
        return submit_first(renders, secrets=secrets, profile=profile)
    if isinstance(job, Rendered):
        chosen = _provider(provider or job.provider)
    else:
        chosen = _provider(provider, job, profile)
        job = as_job(job, "submit", chosen, profile)
    rendered = job if isinstance(job, Rendered) else render_with_hooks(chosen, job, submit=True)
    run = send_with_hooks(chosen, rendered, secrets)
    _record(run, rendered, profile)
    _hand_to_controller(run, [rendered], profile)
    return run


def submit_first(candidates: List[Rendered], *, secrets: Optional[Mapping[str, str]] = None,
                 profile: Optional[str] = None, on_skip=None, watching=None) -> Run:
    """Send each of ``candidates`` (rendered requests, in order) until a platform takes it: a
    capacity or quota refusal (``cloudtrain.orchestrate.failover``: the platform's own codes) moves on to
    the next, and ``on_skip(reason)`` hears why; any other error stops there.  A job that a
    platform accepted and then failed before it started for want of capacity (SageMaker's
    ``CapacityError``, spot capacity lost) moves on too: while a next candidate is left, the run
    is watched until it starts.  Every job a platform accepted is in the ledger before it is
    watched (a watch that fails, or a process killed meanwhile, leaves no job unrecorded); the
    row says the provider that ran it and the refusals before it.  ``watching(run)``: a context
    manager around the watch (the CLI's makes an interrupt cancel the run there, as it does
    while a job is followed)."""
    from contextlib import nullcontext
    from .orchestrate import failover
    from .spec.errors import CloudtrainError
    tried: List[str] = []
    for i, rendered in enumerate(candidates):
        last = i == len(candidates) - 1
        chosen = get_provider(rendered.provider)
        try:
            run = send_with_hooks(chosen, rendered, secrets)
        except Exception as exc:
            if last or not failover.is_capacity_refusal(rendered.provider, exc):
                raise
            tried.append(failover.reason(rendered.provider, exc))
            if on_skip is not None:
                on_skip(tried[-1])
            continue
        _record(run, rendered, profile, tried=list(tried))  # first: whatever happens next, the job is known
        if not last and chosen.refused_after_create:
            try:
                with (watching or nullcontext)(run):
                    refused = failover.refused_before_start(run)
            except CloudtrainError as exc:  # e.g. DescribeTrainingJob denied: the job is the user's to see to
                if exc.args:
                    exc.args = (f"{exc.args[0]}; {run.handle} was created and is in cloudtrain list, not "
                                f"cancelled: cloudtrain cancel {run.handle} stops it", *exc.args[1:])
                raise
            if refused is not None:
                _record_status(run)  # as it ended
                tried.append(refused)
                if on_skip is not None:
                    on_skip(refused)
                continue
        _hand_to_controller(run, candidates[i:], profile)
        return run
    raise BadInput("no provider to submit to")  # (an empty candidates list)


def _hand_to_controller(run: Run, candidates: List[Rendered], profile: Optional[str]) -> None:
    """A job that needs following (restarts the platform does not make, a budget, a run-time
    limit the platform lacks) becomes the controller's, which is started when none runs
    (``cloudtrain.orchestrate.controller``).  The job runs either way: a failure here is a warning."""
    import warnings
    from .spec.errors import CloudtrainWarning
    try:
        from .orchestrate import controller
        if controller.adopt(run.handle, candidates, profile=profile or os.environ.get("CLOUDTRAIN_PROFILE") or None):
            controller.ensure_running()
    except Exception as exc:  # noqa: BLE001
        warnings.warn(CloudtrainWarning(f"{run.handle} is running, but the controller does not follow it ({exc}); "
                                        "cloudtrain controller status says more"), stacklevel=3)


def _record_status(run: Run) -> None:
    """The run's state, read now, in its ledger row (a failure to: a warning, as ``_record``)."""
    import warnings
    from .orchestrate import ledger
    from .spec.errors import CloudtrainWarning
    try:
        ledger.update(run.status())
    except Exception as exc:  # noqa: BLE001
        warnings.warn(CloudtrainWarning(f"the ledger row of {run.handle} keeps its last state ({exc})"), stacklevel=3)


def _record(run: Run, rendered: Rendered, profile: Optional[str], tried=()) -> None:
    """The submission in the ledger; a ledger that cannot be written never fails a submit that
    the platform accepted (a warning says so)."""
    import warnings
    from .orchestrate import ledger
    from .spec.errors import CloudtrainWarning
    try:
        ledger.record(run.handle, rendered, profile=profile or os.environ.get("CLOUDTRAIN_PROFILE") or None,
                      tried=tried)
        from .runtime import requestlog
        requestlog.keep(run.handle, rendered)  # what the dashboard shows as the job's request
    except Exception as exc:  # noqa: BLE001  (the job runs: say so, and go on)
        warnings.warn(CloudtrainWarning(f"{run.handle} is running but is not in the ledger ({exc})"), stacklevel=3)


def stage(job: JobLike, provider: Union[str, Provider, None] = None, *, profile: Optional[str] = None) -> List[str]:
    """Upload the job's code (with the launcher) to where ``provider``'s nodes will read it, and
    send no job: after every check ``submit`` makes first (offline), the provider's
    ``ship_code``.  Returns the URLs written or found there already (the code is
    content-addressed: staging it again, or submitting it, uploads nothing).  ``BadInput`` for a
    provider whose code travels inside its request (local, docker, Kubernetes)."""
    chosen = _provider(provider, job, profile)
    return chosen.ship_code(render_with_hooks(chosen, as_job(job, "stage", chosen, profile), submit=True))


def account_settings(provider: str, profile: Optional[str] = None) -> dict:
    """``provider``'s options in the user config and the project file found from the current
    directory (and ``profile``'s, default ``$CLOUDTRAIN_PROFILE``), merged as ``submit`` merges
    them beneath a job: what ``list``, ``status``, ``logs``, ``cancel``, ``outputs`` and ``wait``
    read (e.g. a region, a workspace)."""
    from .input.config import Settings
    merged: dict = {}
    for layer in Settings.load(None, profile).layers(provider):
        merged.update(layer.options)
    return merged


def configured(provider: str, profile: Optional[str] = None) -> Provider:
    """Provider ``provider`` with its account settings (``account_settings``) as ``account``."""
    chosen = get_provider(provider)
    chosen.account = account_settings(provider, profile)
    return chosen


def attach(handle: str, *, profile: Optional[str] = None) -> Run:
    """A ``Run`` for an existing job handle ``PROVIDER://ID`` (the provider with the settings of
    the config files and ``profile``)."""
    from .input.homedir import home
    from .runtime.store import Store
    name, job_id = parse_handle(handle)  # (a bad handle: BadInput before the store is opened)
    store = Store() if (home() / "state.db").exists() else None  # (reading a cloud job makes no home)
    if store is not None and store.plan_get(handle) is not None:  # a job the controller follows: one handle
        from .orchestrate.controller import ensure_running
        from .orchestrate.controller_run import PlanRun
        ensure_running(store)  # (after a reboot: the next command starts the controller again)
        return PlanRun(handle, lambda provider: configured(provider, profile), store)
    return Run(configured(name, profile), job_id)


def controller(**kwargs):
    """The controller (``cloudtrain.orchestrate.controller.Controller``) acting as submit does: each
    provider with the account settings of the config files (and the plan's profile), attempts
    rendered and sent with the plugins' hooks.  ``kwargs``: ``store``, ``poll``, ``out``, or a
    ``provider_for(name, profile)`` of your own."""
    from .orchestrate.controller import Controller
    kwargs.setdefault("provider_for", configured)
    return Controller(render=lambda provider, job: render_with_hooks(provider, job, submit=True),
                      send=send_with_hooks, **kwargs)


def status(handle: str, *, profile: Optional[str] = None) -> JobStatus:
    return attach(handle, profile=profile).status()


def outputs(handle: str, dest=None, *, profile: Optional[str] = None) -> list:
    """Download the output of job ``handle`` into ``dest`` (default ``./outputs/<id>``); the files.
    A directory the download made is marked so that it never ships with a job's code
    (``cloudtrain.transfer.outputs.marked``)."""
    from pathlib import Path
    from .transfer.outputs import default_dest, marked
    name, job_id = parse_handle(handle)
    target = Path(dest) if dest else default_dest(handle)
    with marked(target):
        return configured(name, profile).outputs(job_id, target)


def cancel(handle: str, *, profile: Optional[str] = None) -> JobStatus:
    return attach(handle, profile=profile).cancel()


def jobs(since: Optional[float] = None, providers: Optional[Iterable[str]] = None,
         states: Optional[Iterable[str]] = None, *, refresh: bool = False, profile: Optional[str] = None,
         on_error=None, limit: Optional[int] = None) -> list:
    """The ledger's rows (``cloudtrain.orchestrate.ledger.Entry``), newest first, as ``cloudtrain list``
    shows them: every provider's jobs submitted from this machine (and the local ones), filtered
    by ``since`` (seconds since the epoch), ``providers`` and ``states``.  A cloud row still
    running is read from its platform again when it is stale (``ledger.STALE_SECONDS``), every
    one with ``refresh``; a cloud provider named in ``providers`` is asked for its jobs (as
    ``list -p`` always did), and those are kept in the ledger too.  ``on_error(what, exc)`` hears
    of a platform that cannot be read (its rows stay as stored); without it the error is raised."""
    from .orchestrate import ledger
    from .spec.errors import CloudtrainError
    from .extend.plugins import get_provider_class
    from .runtime.store import Store
    store = Store()
    names = list(providers) if providers is not None else None
    for name in names or ():
        if get_provider_class(name).local_state:
            continue
        try:
            for status in configured(name, profile).list():
                ledger.update(status, store=store)
        except CloudtrainError as exc:
            if on_error is None:
                raise
            on_error(name, exc)
    found = ledger.entries(since=since, providers=names, states=states, limit=limit, store=store)
    if _reconcile_here([e for e in found if e.local and not e.terminal], on_error):
        found = ledger.entries(since=since, providers=names, states=states, limit=limit, store=store)
    stale = [e for e in found if not e.local and not e.terminal and (refresh or e.stale())]
    planned = {p["handle"] for p in store.plans(unfinished=False)}  # the controller keeps those rows
    stale = [e for e in stale if e.handle not in planned]
    listed = set(names or ()) - {n for n in names or () if get_provider_class(n).local_state}
    stale = [e for e in stale if e.provider not in listed and not _keeps_own_state(e.provider)]  # (listed: just read)
    if stale:
        ledger.refresh(stale, provider_for=lambda name, own: configured(name, profile or own),
                       on_error=None if on_error is None else (lambda e, exc: on_error(e.handle, exc)), store=store)
        found = ledger.entries(since=since, providers=names, states=states, limit=limit, store=store)
    return found


def _reconcile_here(running: list, on_error=None) -> bool:
    """The rows of this machine's jobs (local, docker) that say they run, read again from their
    provider: one whose supervisor is gone (killed with its watchdog, an OOM kill of both) is
    failed there, with the reason, and its nodes released.  True when one was."""
    from .spec.errors import CloudtrainError
    from .extend.plugins import get_provider
    changed = False
    for entry in running:
        try:
            changed |= get_provider(entry.provider).status(entry.job_id).terminal
        except CloudtrainError as exc:
            if on_error is not None:
                on_error(entry.handle, exc)
    return changed


def _keeps_own_state(name: str) -> bool:
    """A provider whose jobs live in this machine's store (local, docker): its ledger rows read
    the store, never a platform (one whose store row is gone, e.g. pruned, stays as recorded)."""
    from .spec.errors import CloudtrainError
    from .extend.plugins import get_provider_class
    try:
        return bool(get_provider_class(name).local_state)
    except CloudtrainError:  # a plugin no longer installed: refresh says so
        return False


def list_jobs(provider: Optional[str] = None, on_error=None, *, profile: Optional[str] = None) -> List[JobStatus]:
    """Jobs of one provider, or of every provider that keeps its jobs on this machine (local,
    docker: no network call); ``on_error(name, exc)`` is told of a provider that cannot list
    (SDK missing, platform unreachable) and the others go on."""
    from .spec.errors import CloudtrainError
    from .extend.plugins import get_provider_class, providers
    names = [provider] if provider else [n for n in providers() if get_provider_class(n).local_state]
    out: List[JobStatus] = []
    for name in names:
        try:
            out.extend(configured(name, profile).list())
        except CloudtrainError as exc:
            if on_error is None:
                raise
            on_error(name, exc)
    return out
