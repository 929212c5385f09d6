"""Reading job files: YAML with line numbers, ``--set`` overrides, errors that point at the line."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Type

import yaml
from pydantic import BaseModel, ValidationError

from . import yamlio
from .errors import BadInput, JobFileError
from .job import JobSpec, Source


def _index_lines(node, path: tuple = (), out: Optional[dict] = None) -> dict:
    """``{(key, ...): line}`` for every mapping key and sequence item of a composed YAML tree."""
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[path + (key,)] = key_node.start_mark.line + 1
            _index_lines(value_node, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[path + (i,)] = item.start_mark.line + 1
            _index_lines(item, path + (i,), out)
    return out


def parse_yaml(text: str, filename: str) -> Tuple[Any, Dict[tuple, int]]:
    try:
        node, data = yamlio.parse(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise JobFileError(f"invalid YAML: {exc.problem}", file=filename,
                           line=mark.line + 1 if mark else None) from None
    if node is None:
        raise JobFileError("the file is empty; a job needs at least name and command", file=filename)
    if not isinstance(data, dict):
        raise JobFileError("the top level must be a mapping (name: ..., command: ...)", file=filename, line=1)
    return data, _index_lines(node)


def parse_override(item: str) -> Tuple[str, Any]:
    """``a.b=c`` -> ``("a.b", c)`` with ``c`` read as a YAML scalar (``4`` is a number)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise BadInput(f"--set {item!r}: expected KEY=VALUE, e.g. --set distribution.nodes=4")
    try:
        value = yamlio.load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


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


def describe_error(err: dict) -> str:
    """One pydantic error as a short human phrase: ``must be ≥ 1, got 0``."""
    kind, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "unknown field; check the spelling (cloudtrain schema lists every field)"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sym = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()))
        return f"must be {sym} {bound}, got {got!r}"
    if kind in ("enum", "literal_error"):
        return f"must be {ctx.get('expected', 'one of the allowed values')}, got {got!r}"
    if kind == "string_pattern_mismatch":
        return f"{got!r} does not match {ctx.get('pattern')}"
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"{msg[0].lower()}{msg[1:]}, got {got!r}"
    return msg


def raise_validation(exc: ValidationError, source: Optional[Source], prefix: tuple = ()) -> None:
    """Turn the first pydantic error into a ``JobFileError`` at its file, line and field."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    loc = prefix + tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    field = ".".join(str(p) for p in loc) or None
    message = describe_error(err)
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    filename = line = None
    if source is not None:
        override = source.override_of(loc)
        if override is not None:
            raise JobFileError(message, file=f"--set {override}",
                               field=field if field != override else None) from None
        filename = str(source.path) if source.path else None
        line = source.line_of(loc)
    raise JobFileError(message, file=filename, line=line, field=field) from None


def validate_model(model: Type[BaseModel], data: Any, source: Optional[Source], prefix: tuple = ()):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise_validation(exc, source, prefix)


def load_job(path, overrides: Optional[Mapping[str, Any] | Iterable[str]] = None) -> JobSpec:
    """Read a job file; ``overrides`` is ``{"distribution.nodes": 4}`` or ``["distribution.nodes=4"]``."""
    path = Path(path)
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{shown}: no such file; check the path to the job file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise BadInput(f"{shown}: cannot read the job file ({exc.__class__.__name__})") from None
    data, lines = parse_yaml(text, shown)
    return job_from_dict(data, path=path, lines=lines, overrides=overrides)


def job_from_dict(data: dict, *, path: Optional[Path] = None, lines: Optional[dict] = None,
                  overrides=None) -> JobSpec:
    if overrides and not isinstance(overrides, Mapping):
        overrides = dict(parse_override(item) for item in overrides)
    overrides = dict(overrides or {})
    data = apply_overrides(copy.deepcopy(data), overrides)
    source = Source(path, lines or {}, overrides)
    job = validate_model(JobSpec, data, source)
    job._source = source
    return job
