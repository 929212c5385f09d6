"""What a pydantic model expects at each place of its data.

Two uses: a scalar that YAML read as a number or a boolean is given back as the text the user
wrote wherever the model wants a string (``VERSION: 1.10`` stays ``"1.10"``, not ``"1.1"``;
``MODE: on`` stays ``"on"``, not ``"true"``); and the field names a mapping may have, to suggest
one for a misspelt field.
"""
from __future__ import annotations

import collections.abc
import enum
import types
import typing
from typing import Any, Dict, List, Mapping, Optional

from pydantic import BaseModel

_UNIONS = (typing.Union, getattr(types, "UnionType", typing.Union))
_MAPPINGS = (dict, collections.abc.Mapping)
_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence)


def _is_mapping(m: Any) -> bool:
    return typing.get_origin(m) in _MAPPINGS or m in _MAPPINGS


def _is_sequence(m: Any) -> bool:
    return typing.get_origin(m) in _SEQUENCES or m in _SEQUENCES


def as_written(annotation: Any, data: Any, texts: Mapping[tuple, str], path: tuple = ()) -> Any:
    """``data`` (a copy where anything changes) with the scalars of ``texts`` (``{path: text as
    written}``) put back as text wherever ``annotation`` wants a string there."""
    cut = len(path)
    holders = {p[:i] for p in texts if p[:cut] == path for i in range(cut, len(p))}
    return _as_written(annotation, data, texts, path, holders) if holders or path in texts else data


def _as_written(annotation: Any, data: Any, texts: Mapping[tuple, str], path: tuple, holders: set) -> Any:
    """``holders``: the paths of the mappings and lists that hold a scalar of ``texts``."""
    if isinstance(data, (dict, list)) and path not in holders:
        return data
    if isinstance(data, dict):
        model = _member(annotation, _is_model)
        if model is not None:
            fields = _fields(model)
            return {k: _as_written(fields[k].annotation, v, texts, path + (k,), holders) if k in fields else v
                    for k, v in data.items()}
        mapping = _member(annotation, _is_mapping)
        if mapping is None:
            return data
        args = typing.get_args(mapping)
        value_type = args[1] if len(args) == 2 else Any
        return {k: _as_written(value_type, v, texts, path + (k,), holders) for k, v in data.items()}
    if isinstance(data, list):
        sequence = _member(annotation, _is_sequence)
        if sequence is None:
            return data
        args = typing.get_args(sequence)
        if typing.get_origin(sequence) is tuple and args and args[-1] is not Ellipsis:
            items = list(args) + [Any] * (len(data) - len(args))
        else:
            items = [args[0] if args else Any] * len(data)
        return [_as_written(t, v, texts, path + (i,), holders) for i, (t, v) in enumerate(zip(items, data))]
    if isinstance(data, (bool, int, float)) and path in texts and _wants_text(annotation, data):
        return texts[path]
    return data


def field_names(model: type, loc: tuple) -> Optional[List[str]]:
    """The field names of the model found at ``loc`` under ``model`` (None: not a model there)."""
    annotation: Any = model
    for part in loc:
        current = _member(annotation, _is_model)
        if current is not None and isinstance(part, str):
            fields = _fields(current)
            if part in fields:
                annotation = fields[part].annotation
                continue
            named = _member(annotation, lambda m, part=part: getattr(m, "__name__", None) == part)
            if named is not None:  # pydantic names the union member it tried
                annotation = named
                continue
            return None
        container = _member(annotation, lambda m: _is_mapping(m) or _is_sequence(m))
        if container is None:
            return None
        args = typing.get_args(container)
        annotation = (args[-1] if _is_mapping(container) else args[0]) if args else Any
    found = _member(annotation, _is_model)
    return list(_fields(found)) if found is not None else None


def _members(annotation: Any) -> List[Any]:
    """The types an annotation allows: ``Optional[Union[A, B]]`` -> ``[A, B, None]``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in _UNIONS:
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _member(annotation: Any, test) -> Any:
    return next((m for m in _members(annotation) if test(m)), None)


def _is_model(m: Any) -> bool:
    return isinstance(m, type) and issubclass(m, BaseModel)


def _fields(model: Any) -> Dict[str, Any]:
    """Fields by the name the data uses (the alias, when there is one)."""
    return {(f.alias or name): f for name, f in model.model_fields.items()}


def _is_text(m: Any) -> bool:
    if isinstance(m, type):
        return issubclass(m, str)  # str, and enums of strings
    if typing.get_origin(m) is typing.Literal:
        return any(isinstance(a, str) for a in typing.get_args(m))
    return False


def _takes(m: Any, value: Any) -> bool:
    """Whether a non-string member ``m`` of an annotation takes ``value`` as it is."""
    if m is Any or m is object:
        return True
    if typing.get_origin(m) is typing.Literal:
        return value in [a for a in typing.get_args(m) if not isinstance(a, str)]
    if m is bool:
        return isinstance(value, bool)
    if m is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if m is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(m, type) and issubclass(m, enum.Enum) and value in {e.value for e in m}


def _wants_text(annotation: Any, value: Any) -> bool:
    members = _members(annotation)
    return any(_is_text(m) for m in members) and not any(_takes(m, value) for m in members if not _is_text(m))
