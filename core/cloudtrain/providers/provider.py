"""The provider base class, job statuses, handles and the ``Rendered`` request (the neutral
states are ``cloudtrain.spec.states``).

The flow is render-first: ``submit(job) = schedule(render(job))``.  ``render`` is pure (no
network, no clock, no credentials), so ``--dry-run`` shows exactly what ``submit`` sends.
"""
from __future__ import annotations

import abc
import functools
import importlib
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Callable, ClassVar, Dict, FrozenSet, Iterable, Iterator, List, Mapping,
                    Optional, Tuple, Type)

from pydantic import BaseModel, ConfigDict

from ..extend import registry
from ..spec.errors import BadInput, CloudtrainWarning, JobFileError, MissingExtra
from ..spec.job import JobSpec
from ..launch import platform as platforms
from ..launch.platform import Cluster, Platform
from .request import Artifact, Rendered, Request
from ..input.secrets import MASK, Masker, resolve_secrets
from ..spec.states import State  # noqa: F401  (re-exported: plugins import it from here)

if TYPE_CHECKING:
    from .images import Pulls

__all__ = ["Artifact", "JobStatus", "NodeExec", "Provider", "Rendered", "Request", "Run", "State"]


@dataclass
class JobStatus:
    handle: str
    state: State
    raw_state: Optional[str] = None
    name: Optional[str] = None
    message: str = ""
    nodes: Optional[int] = None
    nodes_up: Optional[int] = None
    exit_code: Optional[int] = None
    created_at: Optional[float] = None
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    # every restart of the whole job: {"attempt": 1, "reason": "node 1 exited with code 1", "at": time}
    restarts: List[dict] = field(default_factory=list)
    # a job the controller follows: [{attempt, provider, handle, started_at, ended_at, reason, cost}]
    attempts: List[dict] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.state.terminal

    def to_dict(self) -> dict:
        d = asdict(self)
        d["state"] = self.state.value
        return d


@dataclass
class NodeExec:
    """A command to run here that reaches into a node (``Provider.exec_command``): ``argv``, with
    ``env`` (None: this process's) in ``cwd`` (None: the current directory)."""
    argv: List[str] = field(default_factory=list)
    env: Optional[Dict[str, str]] = None
    cwd: Optional[str] = None
    # a platform whose way in is an SDK call, not a program (a Kubernetes pod exec): it runs the
    # command and returns its exit code (argv then only names what it does)
    run: Optional[Callable[[], int]] = None


def log_lines(chunks: Iterable[str]) -> Iterator[str]:
    """One line per item, each ending with exactly one ``"\n"`` (as reading a text file gives
    them): a chunk holding several lines is split, a line without its ending gets one, and
    ``"\r\n"`` becomes ``"\n"``.  ``"".join`` of the lines is the log's text."""
    for chunk in chunks:
        for line in (chunk[:-1] if chunk.endswith("\n") else chunk).split("\n"):
            yield (line[:-1] if line.endswith("\r") else line) + "\n"


def _yielding_lines(logs: Callable[..., Iterable[str]]) -> Callable[..., Iterator[str]]:
    @functools.wraps(logs)
    def wrapper(self, job_id: str, follow: bool = False) -> Iterator[str]:
        return log_lines(logs(self, job_id, follow=follow))
    wrapper.yields_lines = True  # type: ignore[attr-defined]  # a mark on the function (mypy does not model those)
    return wrapper


def make_handle(provider: str, job_id: str) -> str:
    return f"{provider}://{job_id}"


def parse_handle(handle: str) -> Tuple[str, str]:
    provider, sep, job_id = handle.partition("://")
    if not sep or not provider or not job_id:
        raise BadInput(f"{handle!r} is not a job handle; expected PROVIDER://ID, e.g. local://digits-ddp-1a2b3c "
                       "(cloudtrain list shows them)")
    return provider, job_id


def refused_fields(job: JobSpec, refused: Mapping[str, str]) -> List[Tuple[tuple, str]]:
    """``(loc, why)`` for each dotted neutral field in ``refused`` that ``job`` sets to anything
    but its default (``"resources.shm_gb"``, ``"max_restarts"``)."""
    found = []
    for dotted, why in refused.items():
        owner, value, default = job, job, None
        for part in dotted.split("."):
            owner = value
            value = getattr(owner, part)
        info = type(owner).model_fields[part]
        default = info.get_default(call_default_factory=True)  # the factory's value, else the default
        if value != default:
            found.append((tuple(dotted.split(".")), why))
    return found


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Provider(abc.ABC):
    """Base class of every provider.  Subclasses set the class attributes and implement
    ``artifacts`` (pure), ``schedule``, ``status``, ``logs``, ``cancel`` and ``list``."""

    name: ClassVar[str]
    extra: ClassVar[str]
    description: ClassVar[str] = ""
    sdk_modules: ClassVar[Tuple[str, ...]] = ()
    Options: ClassVar[Type[BaseModel]] = NoOptions
    # The one table from the platform's states to the neutral ones.
    states: ClassVar[Mapping[str, State]] = {}
    # The name of the platform whose nodes this provider's jobs run on, one of ``PLATFORMS`` in
    # the plugin's ``detect`` module (None: the generic platform, ``CLOUDTRAIN_*`` variables).
    platform: ClassVar[Optional[str]] = None
    # Jobs are listed from this machine's state store, without asking a platform: `cloudtrain
    # list` without -p covers these providers (local, docker); a cloud's needs `-p`.
    local_state: ClassVar[bool] = False
    # Seconds between status reads while a job is followed or waited for (a cloud API is
    # rate-limited; a local state store is not).  The class's default; an instance may set its own
    # (CloudProvider's ``poll``), so not a ClassVar.
    status_poll: float = 2.0
    # "module:function" that rebuilds this provider's catalog through its SDK (cloudtrain resources --refresh).
    catalog_refresh: ClassVar[Optional[str]] = None
    # How to install the SDK; third-party plugins set their own (default: cloudtrain's extra).
    install_hint_text: ClassVar[Optional[str]] = None
    # -- the platform's facts, each with its source next to it in the plugin (docs/plugins.md) -------------
    # The registries the platform pulls a job's image from (``cloudtrain.providers.images.Pulls``):
    # ``validate`` warns about a Docker Hub image it will not pull.  None: it pulls from anywhere.
    image_registries: ClassVar[Optional["Pulls"]] = None
    # The platform's own error codes that mean "refused for capacity or quota" (failover moves on
    # to the next provider: ``cloudtrain.orchestrate.failover``), as the platform documents them.
    capacity_codes: ClassVar[FrozenSet[str]] = frozenset()
    # Codes that are a capacity or quota refusal only when the error's message says quota or
    # exceeded (a code the platform also uses for other refusals).
    quota_worded_codes: ClassVar[FrozenSet[str]] = frozenset()
    # Whether the platform accepts a job and may then fail it for capacity before it starts (its
    # message naming one of ``capacity_codes``): failover watches such a job until it starts.
    refused_after_create: ClassVar[bool] = False
    # Whether the platform restarts the whole job itself after a failure when the job asks for
    # restarts (``max_restarts``): the controller then only watches and adds no restart on top
    # (``cloudtrain.orchestrate.controller``, docs/controller.md).
    restarts_itself: ClassVar[bool] = False
    # Whether the platform stops a job at ``max_runtime`` itself; when not, the controller cancels it.
    has_runtime_limit: ClassVar[bool] = True
    # What kind of failure the platform's status message names: ``(regex, kind)`` pairs, searched
    # in order, the first match wins; a kind is one of ``cloudtrain.orchestrate.failures.KINDS``
    # ("preemption", "capacity", "node-failure", "hang") (``failures.classify``).
    failure_words: ClassVar[Tuple[Tuple[str, str], ...]] = ()
    # The account settings of the config files and the profile (``providers.<name>``, merged as
    # submit merges them) for the commands that have no job: list, status, logs, cancel, outputs,
    # wait (``cloudtrain.api.configured``).  A job's own options always come from the job.
    account: Mapping[str, Any] = {}

    def account_option(self, option: str) -> Any:
        """The account settings' ``option`` (e.g. ``region``), or None."""
        return self.account.get(option)

    @classmethod
    def install_hint(cls) -> str:
        """``install_hint_text``, else the registry's (a built-in's extra), else the class's ``extra``."""
        return (cls.install_hint_text or registry.install_hint(registry.PROVIDER, cls.name)
                or f"pip install 'cloudtrain[{cls.extra}]'")

    @classmethod
    def credential_check(cls, options) -> Optional[Tuple[bool, str]]:
        """Where this provider's credentials would come from, looked up offline for ``cloudtrain
        doctor``: ``(found, detail)``, the detail naming where they are or where it looked and the
        fix; names and files only, never a value read into the detail.  ``options`` is the
        provider's merged settings (``Options``), or None when they are invalid.  None: the plugin
        does not say (doctor shows "not checked offline")."""
        return None

    @classmethod
    def require_sdk(cls, module: str):
        """Import one of the provider's SDK modules, or raise ``MissingExtra`` naming the fix."""
        try:
            return importlib.import_module(module)
        except ImportError:
            raise MissingExtra(cls.name, cls.install_hint(), module) from None

    def __init__(self) -> None:
        """A provider's constructor takes typed keyword arguments of its own (injected SDK
        clients for tests, ``poll=``, ``store=``), never a bag of them."""

    def __init_subclass__(cls, **kwargs: Any):
        """Every provider's ``logs`` yields what ``log_lines`` makes of its chunks, so the lines
        of every provider (and of ``Run.logs``) read alike whatever the platform's API returns."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("logs")
        if callable(own) and not getattr(own, "yields_lines", False):
            cls.logs = _yielding_lines(own)  # type: ignore[method-assign]  # wrapping the subclass's own method

    # -- validation and rendering (pure) -----------------------------------------------
    @classmethod
    def options(cls, job: JobSpec):
        from ..input.loading import validate_model
        return validate_model(cls.Options, job.providers.get(cls.name) or {}, job.source, ("providers", cls.name))

    def validate(self, job: JobSpec, *, submit: bool = False, policy: Iterable[str] = ()):
        """Options plus ``check``, and the ``policy`` problems the plugins' ``cloudtrain_validate_job``
        rules found (the api layer asks them); with ``submit``, also ``preflight``: everything
        ``submit`` checks before it contacts the platform.  Raises every problem found together
        (``BadInput``); returns the options."""
        from ..spec.problems import Problems
        problems = Problems()
        options = problems.collect(self.options, job)
        where = f"{job.source.path}: " if job.source and job.source.path else ""
        for problem in policy:
            problems.add(BadInput(f"{where}{problem}"))
        if job.code is None and not self.code_optional:
            problems.add(self.null_code(job))
        from ..input import inputcheck
        hostile = inputcheck.problems(job, self.name)
        for loc, message in hostile:
            problems.add(self.job_error(job, loc, message))
        for loc, message in inputcheck.credential_env(job):
            warnings.warn(CloudtrainWarning(str(self.job_error(job, loc, message))), stacklevel=2)
        if not hostile:
            from ..transfer.shipping import warn_about_code
            warn_about_code(job)  # credential files kept home, links that will dangle, FIFOs left out
        from ..transfer.storage import problems as storage_problems
        for loc, message in storage_problems(job, self.name, self.storage_schemes, self.output_schemes):
            problems.add(self.job_error(job, loc, message))
        if hostile:  # a NUL in a path, a password in a URI: the provider's checks go no further with them
            problems.raise_all()
        for loc, message in refused_fields(job, self.refused_fields):
            problems.add(self.job_error(job, loc, f"{message} ({self.name} has no such setting; remove it, "
                                                  "or run the job on a provider that has one)"))
        if options is not None:
            self.warn_about_image(job, options)
            problems.collect(self.check, job, options)
            if submit:
                self.preflight(job, options, problems)
            if submit and not problems:
                _check_cost(job, self.name, problems)
        problems.raise_all()
        return options

    # The schemes of storage.inputs / storage.output this provider maps (cloudtrain.transfer.storage):
    # "file" is a host path or file:// URI; any other scheme is refused at its line.
    storage_schemes: ClassVar[Tuple[str, ...]] = ()
    # Those storage.output takes, where they differ from the inputs' (None: the same).
    output_schemes: ClassVar[Optional[Tuple[str, ...]]] = None
    # Whether ``code: null`` (the image holds the code; nothing is shipped) is taken.
    code_optional: ClassVar[bool] = False
    # Neutral fields this provider's platform has no place for, each with why (its source): set
    # to anything but their default, they are exit 2 at their line, never dropped in silence.
    refused_fields: ClassVar[Mapping[str, str]] = {}

    def check(self, job: JobSpec, options) -> None:
        """Provider-specific checks of a job against its options; raise ``BadInput``."""

    # Options a submit needs, each with an example value: ``validate`` and ``submit`` name every
    # one that is not set (and has no ``fallback``) before anything is sent.
    required: ClassVar[Mapping[str, str]] = {}
    # What to do about a required option besides setting it (e.g. how to stage code).
    required_help: ClassVar[Mapping[str, str]] = {}

    def fallback(self, option: str, job: JobSpec, options) -> bool:
        """Whether a required ``option`` that is not set comes from elsewhere (e.g. the SDK's
        environment: AWS_DEFAULT_REGION).  Offline: no request is sent."""
        return False

    def preflight(self, job: JobSpec, options, problems) -> None:
        """Every check ``submit`` makes before it contacts the platform, each problem added to
        ``problems`` (a ``cloudtrain.spec.problems.Problems``) rather than raised: the required
        options, the code directory, the secrets' sources.  Providers add their own."""
        from ..input.secrets import secret_problems
        for problem in self.sdk_problems():
            problems.add(problem)
        for option, example in self.required.items():
            unset = getattr(options, option, None) in (None, "")
            if unset and not problems.collect(self.fallback, option, job, options):
                problems.add(self.not_set(job, option, example))
        if job.code_path is not None and not job.code_path.is_dir():  # code_path is None iff code is
            problems.add(self.job_error(job, ("code",), f"the code directory {job.code_path} does not exist; fix "
                                                        "`code` (relative to the job file)"))
        for problem in secret_problems(job):
            problems.add(problem)

    def warn_about_image(self, job: JobSpec, options) -> None:
        """Say so when this platform will not pull the image the job gives it (``cloudtrain.providers.images``)."""
        from .images import unpullable
        own = getattr(options, "image", None)
        reason = unpullable(self.name, self.image_registries, own or job.image)
        if reason:
            loc = ("providers", self.name, "image") if own else ("image",)
            warnings.warn(CloudtrainWarning(str(self.job_error(job, loc, reason))), stacklevel=3)

    @classmethod
    def sdk_problems(cls) -> List[BadInput]:
        """The SDK a submit needs and this machine lacks: every provider says so at ``validate``
        (one line, its install command), not only those whose checks happen to import it."""
        from ..extend.plugins import module_installed
        missing = [m for m in cls.sdk_modules if not module_installed(m)]
        return [MissingExtra(cls.name, cls.install_hint(), missing[0])] if missing else []

    def not_set(self, job: JobSpec, option: str, example: str) -> BadInput:
        """``providers.<name>.<option>`` is required to submit and given nowhere."""
        help = self.required_help.get(option)
        error = self.job_error(job, ("providers", self.name, option),
                               f"is not set; {self.name} needs it to submit{': ' + help if help else ''}: set it with "
                               f"cloudtrain config set -p {self.name} {option}={example} "
                               "(or in the job file, or --set)")
        source = job.source
        if source is not None and ("providers", self.name) not in source.lines and error.file == str(source.path):
            error = type(error)(error.detail, file=error.file, field=error.field)  # nowhere in the file: no line
        return error

    def null_code(self, job: JobSpec) -> JobFileError:
        """``code: null`` (the image holds the code) on a provider that ships the code (not ``code_optional``)."""
        return self.job_error(job, ("code",), f"is null (the image holds the code), which {self.name} does not take: "
                                              "its nodes get the launcher with the code directory; set `code` to that "
                                              "directory (code: null works on the Kubernetes providers)")

    @staticmethod
    def job_error(job: JobSpec, loc: tuple, message: str) -> JobFileError:
        """A ``JobFileError`` at the place that gave the value at ``loc`` (the job file's line,
        the settings file's line, the ``--set``)."""
        return JobFileError.at(job, loc, message)

    @abc.abstractmethod
    def render_request(self, job: JobSpec, options) -> Request:
        """The provider's typed request for ``job`` (``cloudtrain.providers.request``; pure: no network, no
        clock, no credentials; secrets as ``***``)."""

    def render(self, job: JobSpec, *, submit: bool = False, policy: Iterable[str] = ()) -> Rendered:
        """The exact request (pure); ``submit``: also every check a submit makes first."""
        options = self.validate(job, submit=submit, policy=policy)
        return Rendered(self.name, job, self.render_request(job, options), options, checked=submit)

    # -- lifecycle -------------------------------------------------------------------
    def submit(self, job_or_rendered, *, secrets: Optional[Mapping[str, str]] = None) -> "Run":
        """Send a rendered request (or render ``job`` first, with every check) and return its
        ``Run``.  The plugins' hooks are the api layer's (``cloudtrain.api.submit``), not this."""
        if isinstance(job_or_rendered, Rendered):
            rendered = job_or_rendered
            if rendered.provider != self.name:
                raise BadInput(f"this request was rendered for {rendered.provider!r}, not {self.name!r}; "
                               f"render the job with provider={self.name!r}, or submit it to {rendered.provider!r}")
            if not rendered.checked:
                from ..spec.problems import Problems
                problems = Problems()
                self.preflight(rendered.job, rendered.options, problems)
                problems.raise_all()
        else:
            rendered = self.render(job_or_rendered, submit=True)
        if secrets is None:
            secrets = resolve_secrets(rendered.job)
        try:
            job_id = self.schedule(rendered, dict(secrets))
        except Exception as exc:  # a platform's error may quote the request: its secrets masked
            mask = Masker(secrets.values())
            exc.args = tuple(mask(a) if isinstance(a, str) else a for a in exc.args)
            raise
        return Run(self, job_id)

    @abc.abstractmethod
    def schedule(self, rendered: Rendered, secrets: Dict[str, str]) -> str:
        """Send the rendered request; return the platform's job id."""
        ...

    @abc.abstractmethod
    def status(self, job_id: str) -> JobStatus:
        ...

    @abc.abstractmethod
    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        """The job's log lines so far, oldest first; ``follow``: then every new line until the
        job ends.  A provider may yield chunks of text, each ending at a line's end: callers get
        them as ``log_lines`` (one line per item, ending with ``"\n"``)."""
        ...

    @abc.abstractmethod
    def cancel(self, job_id: str) -> JobStatus:
        """Stop the job; cancelling an ended job changes nothing (idempotent)."""
        ...

    @abc.abstractmethod
    def list(self) -> List[JobStatus]:
        ...

    # What ``cloudtrain logs`` can pick out of this provider's log (``cloudtrain.runtime.logselect``):
    # "node" when its lines carry their node (``[node1] ``, SageMaker's ``[algo-2] ``), "rank" when
    # their rank too, "since" when the time each line was written is known.  ``--tail`` works on all.
    log_selectors: ClassVar[FrozenSet[str]] = frozenset()
    # Why a selector is not offered, said in one line when it is asked for.
    log_merged: ClassVar[str] = "the platform gives one log for the whole job, every node's output merged in it"

    def select_logs(self, job_id: str, selection, follow: bool = False) -> Iterator[str]:
        """The lines of ``logs`` that ``selection`` (a ``LogSelection``) asks for; a selector this
        provider's log cannot honour (``log_selectors``) is bad input, in one line saying why."""
        from ..runtime.logselect import matches, select
        refused = [name for name in selection.asked() if name not in self.log_selectors]
        if refused:
            raise BadInput(f"logs --{refused[0]}: {self.name} cannot tell {refused[0]}s apart in a job's log: "
                           f"{self.log_merged}")
        if follow and selection.tail is not None:
            raise BadInput(f"logs --tail with --follow: {self.name}'s log is read from its start; "
                           "use --since (where the platform has it) or --tail without --follow")
        if follow:
            return (line for line in self.logs(job_id, follow=True) if matches(line, selection))
        return select(self.logs(job_id), selection)

    def exec_command(self, job_id: str, node: int, command: List[str], interactive: bool) -> "NodeExec":
        """How to run ``command`` inside node ``node`` of running job ``job_id`` (``cloudtrain
        exec``); a provider whose platform has no way into a node refuses, in one line."""
        from ..extend.plugins import providers
        able = sorted(n for n, i in providers().items() if i.cls.exec_command is not Provider.exec_command)
        raise BadInput(f"{self.name} has no way into a running node: the platform offers none to cloudtrain "
                       f"(cloudtrain exec works on {', '.join(able) or 'no installed provider'})")

    def wait(self, job_id: str, *, timeout: Optional[float] = None, poll: Optional[float] = None,
             on_status: Optional[Callable[[JobStatus], None]] = None) -> JobStatus:
        """Poll until the job ends; ``on_status`` sees every status (for a live status line)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status(job_id)
            if on_status is not None:
                on_status(status)
            if status.terminal:
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{make_handle(self.name, job_id)} still {status.state.value} after {timeout}s")
            time.sleep(self.status_poll if poll is None else poll)

    @classmethod
    def map_state(cls, raw: Optional[str]) -> State:
        return cls.states.get(raw, State.UNKNOWN) if raw is not None else State.UNKNOWN

    def handle(self, job_id: str) -> str:
        return make_handle(self.name, job_id)

    # -- instances: the catalog this provider picks from (None: it has none) -----------------
    @classmethod
    def instance_rules(cls):
        """``cloudtrain.catalogs.instances.InstanceRules`` for this provider's catalog, or None."""
        return None

    # -- the data plane: what the platform's nodes see --------------------------------
    @classmethod
    def default_cluster(cls, job: JobSpec) -> Cluster:
        return Cluster(hosts=[f"{job.name}-{i}" for i in range(job.distribution.nodes)])

    @classmethod
    def node_platform(cls) -> Platform:
        """The ``Platform`` this provider's nodes run on (registered in its plugin's ``detect``)."""
        return platforms.find(cls.platform or platforms.GENERIC, near=cls.__module__)

    @classmethod
    def environment(cls, job: JobSpec, node_index: int, cluster: Optional[Cluster] = None) -> Dict[str, str]:
        """The variables this platform injects into node ``node_index`` (used to emulate it)."""
        platform = cls.node_platform()
        env = platform.environment(job, node_index, cluster or cls.default_cluster(job))
        if platform.name == platforms.GENERIC:
            env["CLOUDTRAIN_PLATFORM"] = cls.name
        return env

    @classmethod
    def detector_target(cls) -> str:
        return cls.node_platform().target

    @classmethod
    def detectors_variable(cls) -> str:
        """``CLOUDTRAIN_DETECTORS`` for this provider's nodes: ``name=module:function``."""
        platform = cls.node_platform()
        return f"{platform.name}={platform.target}"

    @classmethod
    def detect(cls, environ: Mapping[str, str]):
        """This platform's node topology from ``environ``, or None if it is not this platform."""
        return cls.node_platform().detect(environ)

    def ship_code(self, rendered: Rendered) -> List[str]:
        """Upload the job's code (the ``shipping`` archive) to where ``rendered`` says its nodes
        find it; the URLs written or found there already (content-addressed: the same code is
        sent once).  ``submit`` and ``cloudtrain stage`` call it.  Providers whose code travels
        inside the request (local, docker, a Kubernetes ConfigMap) have nothing to stage."""
        raise BadInput(f"{self.name} sends the code inside its request (or reads it from the image); "
                       "there is nothing to stage: cloudtrain submit ships it")

    def outputs(self, job_id: str, dest: Path) -> List[Path]:
        """Download the job's output (``storage.output``) into ``dest``; the files written."""
        raise BadInput(f"{self.name} cannot download a job's outputs yet; fetch them from where storage.output "
                       "(or the provider's own output option) points, with the platform's tools")

    # -- helpers for subclasses ------------------------------------------------------------
    @staticmethod
    def rendered_env(job: JobSpec) -> Dict[str, str]:
        """The job's env with every secret present as ``***`` (what a render may show)."""
        env = dict(job.env)
        env.update({name: MASK for name in job.secrets})
        return env


class LogLines(list):
    """A job's lines so far (each ending with ``"\n"``, as ``Provider.logs`` yields them); its
    ``str`` is the text, so ``print(run.logs())`` prints the log."""

    def __str__(self) -> str:
        return "".join(self)


class Run:
    """A submitted job, as the Python API hands it out."""

    def __init__(self, provider: Provider, job_id: str):
        self.provider, self.id = provider, job_id

    @property
    def handle(self) -> str:
        return self.provider.handle(self.id)

    def status(self) -> JobStatus:
        return self.provider.status(self.id)

    def logs(self, follow: bool = False):
        """``Provider.logs`` of this job, the same lines: those so far as ``LogLines`` (a list
        whose ``str`` is the text: ``print(run.logs())``); ``follow``: an iterator that goes on
        with every new line until the job ends."""
        lines = self.provider.logs(self.id, follow=follow)
        return lines if follow else LogLines(lines)

    def progress(self):
        """The job's progress from its log (``cloudtrain.runtime.progress.Progress``: step, total
        steps, epoch, the newest value of every metric, the step rate and ETA), None where the
        log tells none yet."""
        from ..runtime.progress import of_run
        return of_run(self.provider, self.id, self.status())

    def wait(self, timeout: Optional[float] = None, on_status=None, poll: Optional[float] = None) -> JobStatus:
        return self.provider.wait(self.id, timeout=timeout, on_status=on_status, poll=poll)

    def cancel(self) -> JobStatus:
        return self.provider.cancel(self.id)

    @property
    def attempts(self) -> List[dict]:
        """``[{attempt, provider, handle, started_at, ended_at, reason, cost}]``: the submissions
        of a job the controller follows (``cloudtrain.orchestrate.controller``); empty for another."""
        from ..runtime.store import attempts_view
        return attempts_view(self.handle)

    def __repr__(self) -> str:
        return f"<Run {self.handle}>"


def _check_cost(job: JobSpec, provider: str, problems) -> None:
    """``max_hourly_cost`` (cloudtrain.catalogs.prices), for every caller of validate/render/submit."""
    if getattr(job, "max_hourly_cost", None) is not None:
        from ..catalogs.prices import check_max_hourly_cost, estimate
        problems.collect(lambda: check_max_hourly_cost(job, estimate(job, provider)))
    if getattr(job, "max_cost", None) is not None:
        from ..catalogs.prices import estimate as _estimate
        from ..catalogs.budget import check_max_cost
        problems.collect(lambda: check_max_cost(job, _estimate(job, provider)))
