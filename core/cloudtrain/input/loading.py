"""Reading job files: YAML with line numbers, ``--set`` overrides, errors that point at the line.

A job file is read with ``yamlio.read`` (hostile YAML is refused, see there) and its scalars stay
as written wherever the job wants a string (``fieldtypes.as_written``).  Every problem of a file
is reported at once, one ``file:line: field: message`` line each.
"""
from __future__ import annotations

import copy
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Type, TypeVar

from pydantic import BaseModel, ValidationError

from ..spec import fieldtypes, yamlio
from ..spec.credentials import shown_value
from ..spec.errors import BadInput, JobFileError
from ..spec.job import JobSpec, Source
from ..spec.problems import JobFileProblems
from ..extend.registry import builtin_providers
from ..spec.suggest import did_you_mean

MAX_JOB_FILE_BYTES = 1 << 20  # a job file is a few hundred bytes; anything this big is the wrong file


def read_job_text(path: Path) -> str:
    """The job file's text: UTF-8, at most ``MAX_JOB_FILE_BYTES``; else ``BadInput`` naming it."""
    shown = str(path)
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            small = stat.S_ISREG(st.st_mode) and st.st_size <= MAX_JOB_FILE_BYTES
            raw = f.read() if small else f.read(MAX_JOB_FILE_BYTES + 1)  # (a fifo, /dev/zero: no size)
    except FileNotFoundError:
        raise BadInput(f"{shown}: no such file; check the path to the job file") from None
    except IsADirectoryError:
        raise BadInput(f"{shown}: is a directory; give the job file in it, e.g. {path / 'job.yaml'}") from None
    except OSError as exc:
        raise BadInput(f"{shown}: cannot read the job file ({exc.strerror or exc.__class__.__name__}); "
                       "check its permissions") from None
    if len(raw) > MAX_JOB_FILE_BYTES:
        raise BadInput(f"{shown}: larger than {MAX_JOB_FILE_BYTES >> 20} MiB, which no job file is; "
                       "check the path to the job file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobFileError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x}); is it a binary file? A job file "
                           "is YAML text saved as UTF-8", file=shown, line=raw.count(b"\n", 0, exc.start) + 1) from None


def parse_yaml(text: str, filename: str) -> yamlio.Document:
    """The job file's one YAML document (a mapping), or a ``JobFileError`` at its line."""
    try:
        doc = yamlio.read(text)
    except yamlio.YamlProblem as exc:
        raise JobFileError(exc.message, file=filename, line=exc.line) from None
    if doc.data is None:
        raise JobFileError("the file is empty; a job needs at least name and command", file=filename)
    if not isinstance(doc.data, dict):
        raise JobFileError("the top level must be a mapping (name: ..., command: ...)", file=filename,
                           line=doc.lines.get(()) or 1)
    return doc


@dataclass
class Override:
    """One ``--set KEY=VALUE``: the value read as YAML (the same rules as a job file), the text
    as given, and the texts of its scalars (for fields that take them as written)."""

    key: str
    value: Any
    raw: str
    texts: Dict[tuple, str] = field(default_factory=dict)

    @property
    def path(self) -> tuple:
        return tuple(self.key.split("."))


def parse_override(item: str) -> Override:
    """``a.b=c`` -> ``Override("a.b", c)`` with ``c`` read as YAML (``4`` is a number, ``0755``
    stays ``0755`` for a string field); text that is not valid YAML is taken as a string."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise BadInput(f"--set {item!r}: expected KEY=VALUE, e.g. --set distribution.nodes=4")
    key = key.strip()
    if not raw.strip():
        return Override(key, "", raw)
    try:
        doc = yamlio.read(raw)
    except yamlio.YamlProblem as exc:
        if exc.syntax:
            return Override(key, raw, raw)
        raise BadInput(f"--set {key}={shown_value(key, raw)}: {exc.message}") from None
    if doc.duplicates:
        path = ".".join(map(str, doc.duplicates[0][0]))
        raise BadInput(f"--set {key}={shown_value(key, raw)}: {path} is given twice; give it once")
    return Override(key, doc.data, raw, doc.texts)


def _overrides(overrides) -> Dict[str, Override]:
    if not overrides:
        return {}
    if isinstance(overrides, Mapping):
        return {k: Override(k, v, v if isinstance(v, str) else json.dumps(v, default=str))
                for k, v in overrides.items()}
    parsed = [parse_override(item) for item in overrides]
    return {o.key: o for o in parsed}


def apply_overrides(data: dict, overrides: Mapping[str, Any]) -> dict:
    for dotted, value in overrides.items():
        target = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            nxt = target.get(part)
            if nxt is None:
                nxt = target[part] = {}
            if not isinstance(nxt, dict):
                raise BadInput(f"--set {dotted}: {part!r} is not a mapping; set the whole value instead")
            target = nxt
        target[parts[-1]] = value
    return data


def nested_field_hint(model: type, loc: tuple) -> str:
    """``"; did you mean 'distribution.nodes'?"`` for a field written one level too high (``nodes``
    at the top, where a section holds a field of that name, or a near spelling of one) when it is
    closer to that field than to any field of its own level; else ``""``."""
    from ..spec.suggest import nearest
    word, parent = loc[-1], loc[:-1]
    if not isinstance(word, str):
        return ""
    own = fieldtypes.field_names(model, parent) or []
    if word in own:
        return ""
    nested: Dict[str, List[str]] = {}
    for section in own:
        for inner in fieldtypes.field_names(model, parent + (section,)) or ():
            nested.setdefault(inner, []).append(f"{section}.{inner}")
    match = nearest(word, [*own, *nested])
    if match in own or match is None or len(nested[match]) != 1:
        return ""
    return f"; did you mean {nested[match][0]!r}?"


def pattern_mismatch(got: Any, pattern: Optional[str]) -> str:
    """A value that does not match a field's pattern, said in words for the patterns of job.py."""
    from ..spec.job import NAME_PATTERN
    if pattern == NAME_PATTERN and isinstance(got, str):
        if len(got) > 63:
            return f"is {len(got)} characters long; at most 63"
        fixed = re.sub(r"[^a-z0-9-]+", "-", got.lower()).strip("-")[:63].strip("-")
        example = f" (e.g. {fixed!r})" if fixed and fixed != got else ""
        return (f"{got!r} must be lowercase letters, digits and '-', beginning and ending with a letter or digit"
                f"{example}")
    return f"{got!r} does not match {pattern}"


def describe_error(err: Mapping[str, Any], model: Optional[type] = None, loc: tuple = (),
                   written: Optional[str] = None) -> str:
    """One pydantic error as a short human phrase: ``must be ≥ 1, got 0``.  With the ``model``
    validated and the error's ``loc`` in it, an unknown field gets the nearest field's name."""
    kind, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        from ..spec.suggest import field_habit
        hint = field_habit(loc, got)  # another tool's word (num_nodes, run, accelerators: A100:8)
        if not hint and model is not None and loc:
            names = fieldtypes.field_names(model, loc[:-1])
            if names:
                hint = nested_field_hint(model, loc) or did_you_mean(loc[-1], names)
        return f"unknown field{hint or '; check the spelling (cloudtrain schema lists every field)'}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sym = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()))
        return f"must be {sym} {bound}, got {got!r}"
    if kind in ("enum", "literal_error"):
        return f"must be {ctx.get('expected', 'one of the allowed values')}, got {got!r}"
    if kind == "string_pattern_mismatch":
        return pattern_mismatch(got, ctx.get("pattern"))
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return not_a_mapping(loc, got, ctx.get("class_name"))
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    from ..spec.suggest import wrong_type
    typed = wrong_type(kind, got, written)  # a strict field given another type (written: as the file had it)
    if typed:
        return typed
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"{msg[0].lower()}{msg[1:]}, got {got!r}"
    return msg


def not_a_mapping(loc: tuple, got: Any, class_name: Optional[str]) -> str:
    """A part of the job that must be a mapping, given something else: its fields, never the
    model's class name (``--set secrets.X=null`` said "instance of SecretRef")."""
    words = {bool: "true or false", int: "a number", float: "a number", str: "a string", list: "a list"}
    given = "nothing (null)" if got is None else words.get(type(got), f"a {type(got).__name__}")
    if loc[:1] == ("secrets",) and len(loc) == 2:  # (its value is not echoed: it may be the secret itself)
        return (f"must say where the secret's value comes from: {{from_env: VARIABLE}} or {{from_file: PATH}}, "
                f"got {given}; the value itself never goes in the job file")
    from ..spec import job as parts
    model = getattr(parts, class_name or "", None)
    fields = list(getattr(model, "model_fields", {}) or {})
    shown = ", ".join(f"{name}: ..." for name in fields) if fields else "key: value, ..."
    return f"must be a mapping ({shown}), got {given}"


def validation_problems(exc: ValidationError, source: Optional[Source], prefix: tuple = (),
                        model: Optional[type] = None) -> List[JobFileError]:
    """Every pydantic error as a ``JobFileError`` at its file (or ``--set``), line and field."""
    source = source or Source(None, {}, {})
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        problems.append(source.error(describe_error(err, model, loc, source.texts.get(prefix + loc)), prefix + loc))
    return problems


M = TypeVar("M", bound=BaseModel)


def model_problems(model: Type[M], data: Any, source: Optional[Source],
                   prefix: tuple = ()) -> Tuple[Optional[M], List[JobFileError]]:
    """``(instance, [])``, or ``(None, problems)``; scalars stay as written where the model wants
    text (``source.texts``)."""
    if source is not None and source.texts:
        data = fieldtypes.as_written(model, data, source.texts, prefix)
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        return None, validation_problems(exc, source, prefix, model)


def validate_model(model: Type[M], data: Any, source: Optional[Source], prefix: tuple = ()) -> M:
    """The validated model, or every problem raised together (``JobFileProblems``)."""
    instance, problems = model_problems(model, data, source, prefix)
    return _valid(instance, problems)


def _valid(instance: Optional[M], problems: List[JobFileError]) -> M:
    """``instance`` once there is no problem; else every problem raised together, in file order."""
    JobFileProblems.raise_all(sorted_problems(problems))
    if instance is None:  # model_problems gives no instance only together with its problems
        raise RuntimeError("a model was neither validated nor refused with a problem")
    return instance


def sorted_problems(problems: List[JobFileError]) -> List[JobFileError]:
    """In the order of each file (the files as they first come), the ``--set`` ones last."""
    files: Dict[str, int] = {}
    for p in problems:
        files.setdefault(p.file or "", len(files))
    return sorted(problems, key=lambda p: ((p.file or "").startswith("--set "), files[p.file or ""], p.line or 0))


def provider_section_problems(data: dict, source: Source) -> List[JobFileError]:
    """A ``providers.<name>`` section for no known provider (a misspelling): the known ones are
    cloudtrain's own and whatever plugins are installed."""
    sections = data.get("providers")
    if not isinstance(sections, dict):
        return []
    builtin = builtin_providers()
    unknown = [name for name in sections if name not in builtin]
    if not unknown:
        return []
    from ..extend.plugins import providers
    known = sorted(set(builtin) | set(providers()))
    problems = []
    for name in unknown:
        if name not in known:
            hint = did_you_mean(name, known) or ("; fix the name, or install the plugin that provides it "
                                                 "(cloudtrain providers lists the installed ones)")
            problems.append(source.error(f"unknown provider{hint}", ("providers", name)))
    return problems


def duplicate_problems(duplicates, source: Source) -> List[JobFileError]:
    return [JobFileError(f"given twice in one mapping (also at line {first}); YAML would keep only this one: "
                         "remove one", file=str(source.path) if source.path else None, line=line,
                         field=".".join(map(str, path)))
            for path, line, first in duplicates]


# a script given where the job file goes (`cloudtrain submit train.py`: TorchX's and a shell's habit)
SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".ipynb", ".ipy", ".pyc", ".pyz")


def not_a_job_file(path: Path) -> str:
    """The message for a script (or any file that is no YAML) given as the job file."""
    what = "a script" if path.suffix.lower() in SCRIPT_SUFFIXES else "not YAML"
    return (f"{path}: {what}, not a job file; cloudtrain takes a job file (YAML: name, command, ...; "
            f"cloudtrain init writes one), or runs a script without one: -j 1x1 --script {path} "
            "(-j NODESxPROCS, the script's arguments after --)")


def load_job(path, overrides: Optional[Mapping[str, Any] | Iterable[str]] = None, *, provider: Optional[str] = None,
             profile: Optional[str] = None, settings=None) -> JobSpec:
    """Read a job file; ``overrides`` is ``{"distribution.nodes": 4}`` or ``["distribution.nodes=4"]``.
    With ``provider``, its settings from the user config and the project file (``settings``: a
    ``cloudtrain.input.config.Settings``, by default the ones found for this file and ``profile``) go
    beneath the job file's ``providers.<provider>``."""
    path = Path(path)
    if path.suffix.lower() in SCRIPT_SUFFIXES:
        raise BadInput(not_a_job_file(path))
    try:
        doc = parse_yaml(read_job_text(path), str(path))
    except JobFileError:
        if path.suffix.lower() in (".yaml", ".yml", ".json", ""):
            raise
        raise BadInput(not_a_job_file(path)) from None
    if provider is not None and settings is None:
        from .config import Settings
        settings = Settings.load(path, profile)
    return job_from_dict(doc.data, path=path, lines=doc.lines, overrides=overrides, texts=doc.texts,
                         duplicates=doc.duplicates, provider=provider, settings=settings)


def _emulates(info) -> bool:
    """Whether the provider's options take ``emulate`` (its nodes run here); a plugin that cannot
    load here emulates nothing."""
    try:
        return "emulate" in info.cls.Options.model_fields
    except Exception:  # noqa: BLE001  (a broken plugin: said elsewhere, not in this message)
        return False


def emulate_override(provider: str, platform: str) -> str:
    """``--emulate PLATFORM`` as the ``--set`` it stands for, refused at the option itself (not as a
    ``--set`` the user never typed) for a provider that runs on its platform rather than emulating one."""
    from ..extend.plugins import get_provider_class, providers
    if "emulate" not in get_provider_class(provider).Options.model_fields:
        from .config import DEFAULT_PROVIDER
        here = sorted((n for n, info in providers().items() if _emulates(info)),
                      key=lambda n: (n != DEFAULT_PROVIDER, n))
        raise BadInput(f"--emulate is for the providers that run here ({', '.join(here)}): it gives their nodes "
                       f"{platform}'s environment; {provider} runs on its own platform. Drop --emulate, or try it "
                       f"here: -p {(here or [DEFAULT_PROVIDER])[0]} --emulate {platform}")
    return f"providers.{provider}.emulate={platform}"


def checkpoint_for(data: dict, provider: Optional[str]) -> None:
    """``storage.checkpoint: {sagemaker: s3://..., azure: azureml://...}`` names each provider's
    own store (failover across platforms whose stores differ: the controller carries the
    checkpoint from one to the next, docs/controller.md); loaded for ``provider``, it is that
    provider's entry (none: the job keeps no checkpoint there).  In place."""
    storage = data.get("storage")
    if provider is None or not isinstance(storage, dict) or not isinstance(storage.get("checkpoint"), dict):
        return
    storage["checkpoint"] = storage["checkpoint"].get(provider)


def job_from_dict(data: dict, *, path: Optional[Path] = None, lines: Optional[dict] = None,
                  overrides=None, texts: Optional[Dict[tuple, str]] = None, duplicates=(),
                  provider: Optional[str] = None, settings=None) -> JobSpec:
    """The job from data read from ``path`` (``lines``, ``texts``, ``duplicates``: what
    ``yamlio.read`` found there) with ``settings`` for ``provider`` beneath it and ``overrides``
    on top; raises every problem at once."""
    parsed = _overrides(overrides)
    data = copy.deepcopy(data)
    texts = dict(texts or {})
    origins: Dict[Tuple[str, ...], Any] = {}
    if provider is not None and settings is not None:
        from .config import merge
        given, origins = merge(data, provider, settings.layers(provider))
        texts.update(given)
    data = apply_overrides(data, {key: o.value for key, o in parsed.items()})
    for o in parsed.values():
        cut = len(o.path)
        texts = {p: t for p, t in texts.items() if p[:cut] != o.path}
        texts.update((o.path + rel, text) for rel, text in o.texts.items())
    source = Source(path, lines or {}, {key: o.value for key, o in parsed.items()}, texts=texts,
                    raw={key: o.raw for key, o in parsed.items()}, origins=origins)
    checkpoint_for(data, provider)
    problems = duplicate_problems(duplicates, source) + provider_section_problems(data, source)
    job, invalid = model_problems(JobSpec, data, source)
    job = _valid(job, problems + invalid)
    job._source = source
    return job
