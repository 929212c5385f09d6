"""Account settings outside the job file: the user config and the project file, with profiles.

``$CLOUDTRAIN_HOME/config.yaml`` (``$CLOUDTRAIN_CONFIG`` names another file) and a project's
``.cloudtrain.yaml`` (next to the job file or in a directory above it, up to the repository's
root) have the same shape::

    provider: sagemaker              # the default provider
    providers:                       # the same sections as a job file's providers.<name>
      sagemaker: {role_arn: "arn:aws:iam::123456789012:role/train", region: us-east-1}
    profiles:
      prod: {provider: eks, providers: {eks: {cluster: prod, region: us-west-2}}}
    runs: {keep_days: 30, keep_last: 10}   # the user config only: the retention of local runs


A provider's options, lowest first: its defaults, the user config, the project file, the
selected profile (``--profile`` or ``$CLOUDTRAIN_PROFILE``; the user config's, then the
project file's), the job file's ``providers.<name>``, ``--set``.  A section gives whole option
values (a mapping given higher up replaces one given lower).  The files are read with the job
file's reader, and every problem is reported at its ``file:line``.  They hold names, never
credentials (``cloudtrain.spec.credentials``).
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ..spec import yamlio
from ..spec.errors import BadInput, JobFileError
from .homedir import home  # noqa: F401  (the settings' home is the state's)
from ..spec.job import Origin
from ..extend.registry import builtin_providers
from ..spec.suggest import did_you_mean

CONFIG_NAME = "config.yaml"
PROJECT_NAME = ".cloudtrain.yaml"
TOP_KEYS = ("provider", "providers", "profiles", "runs")
PROFILE_KEYS = ("provider", "providers")
MAX_BYTES = 1 << 20
DEFAULT_PROVIDER = "local"


def user_config_path() -> Path:
    """``$CLOUDTRAIN_CONFIG``, else ``$CLOUDTRAIN_HOME/config.yaml``."""
    named = os.environ.get("CLOUDTRAIN_CONFIG")
    return Path(named).expanduser() if named else home() / CONFIG_NAME


def find_project_file(start: Path) -> Optional[Path]:
    """``.cloudtrain.yaml`` in ``start`` or a directory above it, up to the repository's root
    (the first directory with a ``.git``); outside a repository, ``start``'s only."""
    start = start.resolve()
    for directory in (start, *start.parents):
        candidate = directory / PROJECT_NAME
        if candidate.is_file():
            return candidate
        if (directory / ".git").exists():
            return None
    return None


@dataclass
class SettingsFile:
    """One settings file, read and checked: ``data`` with ``lines``/``texts`` as ``yamlio`` gives them."""

    path: Path
    kind: str  # "user config" | "project file"
    data: Dict[str, Any]
    lines: Dict[tuple, int]
    texts: Dict[tuple, str]

    @classmethod
    def read(cls, path: Path, kind: str) -> Optional["SettingsFile"]:
        """The file's settings; None when it does not exist; every problem raised at once."""
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise BadInput(f"{path}: is a directory, not a settings file; remove it or point "
                           "CLOUDTRAIN_CONFIG at a file") from None
        except OSError as exc:
            raise BadInput(f"{path}: cannot read it ({exc.strerror}); check its permissions") from None
        if len(raw) > MAX_BYTES:
            raise BadInput(f"{path}: larger than 1 MiB, which no settings file is; check the file")
        try:
            doc = yamlio.read(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise JobFileError("not UTF-8 text; a settings file is YAML text saved as UTF-8", file=str(path)) from None
        except yamlio.YamlProblem as exc:
            raise JobFileError(exc.message, file=str(path), line=exc.line) from None
        settings = cls(Path(path), kind, doc.data if doc.data is not None else {}, doc.lines, doc.texts)
        settings.check(doc.duplicates)
        return settings

    def error(self, message: str, loc: tuple) -> JobFileError:
        return Origin(self.path, self.lines, ()).error(message, loc)

    def check(self, duplicates=()) -> None:
        """The file's shape: known keys, known provider names, sections that are mappings, no
        credentials.  The options inside a section are checked by the provider's ``Options``
        when that provider is used (``cloudtrain config show`` checks every section)."""
        from ..spec.problems import Problems
        problems = Problems()
        for path, line, first in duplicates:
            problems.add(JobFileError(f"given twice in one mapping (also at line {first}); remove one",
                                      file=str(self.path), line=line, field=".".join(map(str, path))))
        if not isinstance(self.data, dict):
            problems.add(self.error("the top level must be a mapping (provider:, providers:, profiles:)", ()))
            self.data = {}
        self._check_level(self.data, (), TOP_KEYS, problems)
        self._check_runs(problems)
        profiles = self.data.get("profiles", {})
        if not isinstance(profiles, dict):
            problems.add(self.error("must be a mapping of profile names to settings, e.g. "
                                    "profiles: {prod: {provider: eks}}", ("profiles",)))
        else:
            for name, profile in profiles.items():
                if not isinstance(profile, dict):
                    problems.add(self.error("a profile is a mapping (provider:, providers:)", ("profiles", name)))
                    continue
                self._check_level(profile, ("profiles", name), PROFILE_KEYS, problems)
        for loc, value in leaves(self.data):
            from ..spec.credentials import refusal
            refused = refusal(value, loc[-1] if loc else None)
            if refused:
                problems.add(self.error(refused, loc))
        problems.raise_all()

    def _check_level(self, level: dict, at: tuple, keys: Tuple[str, ...], problems) -> None:
        for key in level:
            if key not in keys:
                hint = did_you_mean(key, keys) or f"; a settings file has {', '.join(keys)}"
                problems.add(self.error(f"unknown key{hint}", at + (key,)))
        if "provider" in level:
            name = level["provider"]
            if not isinstance(name, str) or not known_provider(name):
                problems.add(self.error(f"unknown provider {name!r}{provider_hint(str(name))}", at + ("provider",)))
        sections = level.get("providers", {})
        if at and isinstance(sections, list):  # a profile's failover order (cloudtrain.orchestrate.failover)
            for i, name in enumerate(sections):
                if not isinstance(name, str) or not known_provider(name):
                    problems.add(self.error(f"unknown provider {name!r}{provider_hint(str(name))}",
                                            at + ("providers", i)))
            return
        if not isinstance(sections, dict):
            problems.add(self.error("must be a mapping of provider names to their options, e.g. "
                                    "providers: {sagemaker: {region: us-east-1}}", at + ("providers",)))
            return
        for name, section in sections.items():
            if not known_provider(name):
                problems.add(self.error(f"unknown provider{provider_hint(name)}", at + ("providers", name)))
            elif section is not None and not isinstance(section, dict):
                problems.add(self.error("must be a mapping of the provider's options", at + ("providers", name)))

    def _check_runs(self, problems) -> None:
        """``runs:`` (the retention of ``$CLOUDTRAIN_HOME/runs``): the user config's only."""
        if "runs" not in self.data:
            return
        runs = self.data["runs"]
        if self.kind != "user config":
            problems.add(self.error("the retention of runs is this machine's: set it in the user config "
                                    "(cloudtrain config set runs.keep_days=30)", ("runs",)))
        elif not isinstance(runs, dict):
            problems.add(self.error("must be a mapping, e.g. runs: {keep_days: 30, keep_last: 10}", ("runs",)))
        else:
            for key, value in runs.items():
                problem = retention_problem(str(key), value)
                if problem:
                    problems.add(self.error(problem, ("runs", key)))

    def profiles(self) -> Dict[str, dict]:
        return self.data.get("profiles") or {}

    def section(self, provider: str, profile: Optional[str] = None) -> Optional[Tuple[dict, tuple]]:
        """``(options, where in the file)`` that this file (or its ``profile``) gives ``provider``."""
        at = ("profiles", profile) if profile else ()
        level = self.profiles().get(profile) if profile else self.data
        sections = (level or {}).get("providers") or {}
        options = sections.get(provider) if isinstance(sections, dict) else None  # (a list: failover order)
        return (options, at + ("providers", provider)) if options else None


# -- the retention of local runs (``cloudtrain.providers.retention``) -------------------------------------------
DEFAULT_KEEP_DAYS = 30   # a finished local/docker run's directory is removed this long after it ended
DEFAULT_KEEP_LAST = 10   # ... except the newest this many finished runs, whatever their age
RUNS_KEYS = ("keep_days", "keep_last")
OFF = ("off", "none", "never")


@dataclass(frozen=True)
class Retention:
    """When a finished local or Docker run's directory goes: ``keep_days`` after it ended (None:
    never; retention is off) unless it is one of the newest ``keep_last`` finished runs.  As
    restic's ``--keep-within``/``--keep-last``: a run is kept if either rule keeps it."""

    keep_days: Optional[int] = DEFAULT_KEEP_DAYS
    keep_last: int = DEFAULT_KEEP_LAST

    @property
    def off(self) -> bool:
        return self.keep_days is None

    def describe(self) -> str:
        if self.off:
            return "off"
        return f"ended over {self.keep_days}d ago" + (f", beyond the newest {self.keep_last}" if self.keep_last else "")


def _retention_number(key: str, value: Any) -> Optional[int]:
    """``value`` of ``runs.<key>`` as a whole number (None: off); ValueError says why not."""
    if value is False or (isinstance(value, str) and value.strip().lower() in OFF):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        example = "30" if key == "keep_days" else "10"
        raise ValueError(f"expected a whole number of {'days' if key == 'keep_days' else 'runs'} "
                         f"(e.g. {example}), or off; got {value!r}")
    return None if value == 0 and key == "keep_days" else value


def retention_problem(key: str, value: Any) -> Optional[str]:
    """What is wrong with ``runs.<key>: value`` (what ``config set`` and the file check say), or None."""
    if key not in RUNS_KEYS:
        return "unknown key" + (did_you_mean(key, RUNS_KEYS) or f"; runs has {', '.join(RUNS_KEYS)}")
    try:
        _retention_number(key, value)
    except ValueError as exc:
        return str(exc)
    return None


def runs_setting_problem(path: tuple, value: Any, profile: Optional[str], project: bool) -> Optional[str]:
    """What is wrong with ``cloudtrain config set runs.KEY=VALUE`` (``path``: the key's parts)."""
    if project or profile:
        return ("the retention of runs is this machine's: set it in the user config, without "
                + ("--project" if project else "--profile"))
    if len(path) != 2:
        return f"give one setting, e.g. runs.keep_days=30 or runs.keep_last=10 (runs has {', '.join(RUNS_KEYS)})"
    return retention_problem(path[1], value)


def retention(settings: Optional[SettingsFile] = None) -> Retention:
    """The user config's ``runs:`` rule (``settings``: the user config already read), the
    defaults for what it does not set."""
    if settings is None:
        settings = SettingsFile.read(user_config_path(), "user config")
    runs = (settings.data.get("runs") if settings is not None else None) or {}
    days = _retention_number("keep_days", runs["keep_days"]) if "keep_days" in runs else DEFAULT_KEEP_DAYS
    last = _retention_number("keep_last", runs["keep_last"]) if "keep_last" in runs else DEFAULT_KEEP_LAST
    return Retention(keep_days=days, keep_last=last or 0)


def leaves(data, at: tuple = ()):
    """``(path, scalar)`` of every scalar in ``data``."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from leaves(value, at + (key,))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from leaves(value, at + (i,))
    else:
        yield at, data


def known_provider(name: str) -> bool:
    if name in builtin_providers():
        return True
    from ..extend.plugins import providers
    return name in providers()


def provider_hint(name: str) -> str:
    from ..extend.plugins import providers
    known = sorted(set(builtin_providers()) | set(providers()))
    return did_you_mean(name, known) or "; cloudtrain providers lists the installed ones"


@dataclass
class Layer:
    """One section of settings for a provider, from a file (lowest precedence first)."""

    file: SettingsFile
    options: dict
    prefix: tuple

    @property
    def origin(self) -> Origin:
        return Origin(self.file.path, self.file.lines, self.prefix)

    @property
    def label(self) -> str:
        return f"{self.file.path} ({'.'.join(map(str, self.prefix))})"


class Settings:
    """The settings files that apply to a job (or to the current directory) and the profile."""

    def __init__(self, files: List[SettingsFile], profile: Optional[str] = None,
                 environ: Optional[Mapping[str, str]] = None, looked_in: Iterable[Path] = ()):
        self.files, self.profile = files, profile
        self.environ = os.environ if environ is None else environ
        self.looked_in = list(looked_in)
        if profile and not any(profile in f.profiles() for f in files):
            names = sorted({n for f in files for n in f.profiles()})
            where = " or ".join(str(p) for p in self.looked_in) or "no settings file"
            hint = did_you_mean(profile, names) or (
                f"; the profiles are: {', '.join(names)}" if names
                else f"; add it: profiles: {{{profile}: {{provider: ..., providers: ...}}}}")
            raise BadInput(f"no profile {profile!r} in {where}{hint}")

    @classmethod
    def load(cls, job_path=None, profile: Optional[str] = None,
             environ: Optional[Mapping[str, str]] = None) -> "Settings":
        """The user config and the project file found from the job file's directory (or the
        current one); ``profile`` defaults to ``$CLOUDTRAIN_PROFILE``."""
        environ = os.environ if environ is None else environ
        profile = profile or environ.get("CLOUDTRAIN_PROFILE") or None
        user = user_config_path()
        start = Path(job_path).expanduser().resolve().parent if job_path else Path.cwd()
        project = find_project_file(start)
        looked = [user] + ([project] if project else [])
        files = [f for f in (SettingsFile.read(user, "user config"),
                             SettingsFile.read(project, "project file") if project else None) if f is not None]
        return cls(files, profile, environ, looked)

    def default_provider(self) -> str:
        """The selected profile's ``provider``, ``$CLOUDTRAIN_PROVIDER``, the project file's,
        the user config's, else ``local``."""
        return self.default_provider_with_source()[0]

    def failover(self) -> Optional[List[str]]:
        """The selected profile's ``providers: [a, b, c]`` (failover order), else None."""
        if self.profile:
            for f in reversed(self.files):
                named = (f.profiles().get(self.profile) or {}).get("providers")
                if isinstance(named, list) and named:
                    return [str(n) for n in named]
        return None

    def default_provider_with_source(self) -> Tuple[str, str]:
        """``(provider, where it was named)``."""
        failover = self.failover()
        if self.profile and failover and not any(
                (f.profiles().get(self.profile) or {}).get("provider") for f in self.files):
            return failover[0], f"profile {self.profile}'s providers"
        if self.profile:
            for f in reversed(self.files):
                named = (f.profiles().get(self.profile) or {}).get("provider")
                if named:
                    return named, f"{f.path}:{f.lines.get(('profiles', self.profile, 'provider'))}"
        if self.environ.get("CLOUDTRAIN_PROVIDER"):
            return self.environ["CLOUDTRAIN_PROVIDER"], "$CLOUDTRAIN_PROVIDER"
        for f in reversed(self.files):
            if f.data.get("provider"):
                return f.data["provider"], f"{f.path}:{f.lines.get(('provider',))}"
        return DEFAULT_PROVIDER, "the default"

    def layers(self, provider: str) -> List[Layer]:
        """The sections for ``provider``, lowest precedence first."""
        out = []
        for profile in (None, self.profile) if self.profile else (None,):
            for f in self.files:
                found = f.section(provider, profile)
                if found:
                    out.append(Layer(f, *found))
        return out


def from_settings(job, provider: str, option: str) -> bool:
    """Did a settings file (the user's or the project's), not the job file, give
    ``providers.<provider>.<option>``?  The job file overrides the settings files, its neutral
    fields included: a neutral field (``storage.output``) wins over a settings file's option that
    says the same thing (``output_s3``), where the job file's own option would conflict with it."""
    source = getattr(job, "source", None)
    return source is not None and source.origin_of(("providers", provider, option)) is not None


def merge(data: dict, provider: str, layers: List[Layer]) -> Tuple[Dict[tuple, str], Dict[tuple, Origin]]:
    """Put the settings of ``layers`` under ``data["providers"][provider]`` beneath what the job
    file gives there (in place); returns the texts (scalars as written) and the origins of the
    options the settings gave, keyed by their place in the job."""
    if not layers:
        return {}, {}
    sections = data.get("providers")
    if sections is not None and not isinstance(sections, dict):
        return {}, {}  # the job's own problem, reported by its validation
    own = (sections or {}).get(provider)
    if own is not None and not isinstance(own, dict):
        return {}, {}
    merged: Dict[str, Any] = {}
    origins: Dict[tuple, Origin] = {}
    texts: Dict[tuple, str] = {}
    for layer in layers:
        cut = len(layer.prefix)
        for key, value in layer.options.items():
            merged[key] = copy.deepcopy(value)
            at = ("providers", provider, key)
            origins[at] = layer.origin
            texts = {p: t for p, t in texts.items() if p[:3] != at}
            texts.update((("providers", provider) + p[cut:], t) for p, t in layer.file.texts.items()
                         if p[:cut + 1] == layer.prefix + (key,))
    for key, value in (own or {}).items():
        merged[key] = value
        origins.pop(("providers", provider, key), None)
        texts = {p: t for p, t in texts.items() if p[:3] != ("providers", provider, key)}
    data.setdefault("providers", {})
    if data["providers"] is None:
        data["providers"] = {}
    data["providers"][provider] = merged
    return texts, origins
