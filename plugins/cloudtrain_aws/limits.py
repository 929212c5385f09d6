"""An AWS request checked offline against the limits of botocore's own service model.

botocore's ``ParamValidator`` checks types, required members and minimums; the maximum lengths
and sizes and the patterns it leaves to the service, which refuses the request only once it
is sent.  ``violations`` checks them here, read from the model botocore ships
(``botocore/data/<service>/<version>/service-2.json[.gz]``, the newest version, as botocore's
``Loader`` picks it), so the limits cannot drift from the SDK that sends the request.

The model file is read without importing botocore (``render`` imports no SDK; reading the JSON
takes ~25 ms where ``botocore.session`` takes ~220 ms), once per process and service.  Without
botocore installed there is nothing to read and nothing is checked (submit needs it anyway).

Enums are not checked: the service accepts values newer than the installed botocore knows (an
instance type released since), as botocore's own validator, which skips them, allows.

Patterns: the model states them without anchors, the API reference with them (TagValue:
``^([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)$``), so a value must match as a whole.  Java's ``\\p{...}``
classes, which Python's ``re`` lacks, are checked a character at a time by Unicode category.
"""
from __future__ import annotations

import gzip
import importlib.util
import json
import re
import threading
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

Path_ = Tuple[Any, ...]  # where in the request: ("Environment", "NAME"), ("Tags", 2, "Value")

_lock = threading.Lock()
# Java's POSIX class Alnum is ASCII (java.util.regex.Pattern): it has an exact Python spelling.
_POSIX = {r"\p{Alnum}": "a-zA-Z0-9", r"\p{Alpha}": "a-zA-Z", r"\p{Digit}": "0-9"}
_UNICODE = re.compile(r"\\p\{([LZNPS])\}")
# one character class repeated: ([...]*) with \p{L} etc. in it (TagKey, TagValue)
_ONE_CLASS = re.compile(r"^\^?\(?\[((?:\\.|[^\]])*)\]\*\)?\$?$")


def model_file(service: str) -> Optional[Path]:
    """botocore's service model of ``service`` (its newest API version), or None without botocore."""
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]) / "data" / service
    versions = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    for version in reversed(versions):
        for name in ("service-2.json.gz", "service-2.json"):
            if (version / name).is_file():
                return version / name
    return None


@lru_cache(maxsize=None)
def _model(service: str) -> Optional[dict]:
    path = model_file(service)
    if path is None:
        return None
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def model(service: str) -> Optional[dict]:
    with _lock:
        return _model(service)


def input_shape(service: str, operation: str) -> Optional[Tuple[dict, str]]:
    """(the model's shapes, the name of ``operation``'s input shape), or None without botocore."""
    data = model(service)
    if data is None:
        return None
    return data["shapes"], data["operations"][operation]["input"]["shape"]


def matches(pattern: str, value: str) -> Optional[bool]:
    """Whether ``value`` matches the model's ``pattern`` as a whole; None where the pattern has a
    Java construct this cannot check exactly."""
    for java, python in _POSIX.items():
        pattern = pattern.replace(java, python)
    if "\\p{" not in pattern:
        return re.fullmatch(pattern, value, re.S) is not None
    one = _ONE_CLASS.match(pattern)
    if not one or _UNICODE.sub("", one.group(1)).count("\\p{"):
        return None
    categories = set(_UNICODE.findall(one.group(1)))
    rest = _UNICODE.sub("", one.group(1))
    plain = re.compile(f"[{rest}]") if rest else None
    return all(unicodedata.category(ch)[0] in categories or (plain is not None and plain.fullmatch(ch))
               for ch in value)


def violations(shapes: dict, shape_name: str, value: Any, path: Path_ = ()) -> Iterator[Tuple[Path_, str]]:
    """(where, what) for every limit of the model that ``value`` (a request, or a part of it,
    of shape ``shape_name``) breaks: lengths, sizes, ranges, patterns."""
    shape = shapes[shape_name]
    kind = shape["type"]
    name = f"botocore's {shape_name}"
    if kind == "structure":
        for member, spec in shape.get("members", {}).items():
            if isinstance(value, dict) and member in value:
                yield from violations(shapes, spec["shape"], value[member], (*path, member))
        return
    if kind in ("list", "map"):
        size = len(value)
        what = "items" if kind == "list" else "entries"
        if "max" in shape and size > shape["max"]:
            yield path, f"has {size} {what}; at most {shape['max']} ({name})"
        if "min" in shape and size < shape["min"]:
            yield path, f"has {size} {what}; at least {shape['min']} ({name})"
        if kind == "list":
            for i, item in enumerate(value):
                yield from violations(shapes, shape["member"]["shape"], item, (*path, i))
        else:
            for key, item in value.items():
                for where, problem in violations(shapes, shape["key"]["shape"], key, (*path, key)):
                    yield where, "name " + problem
                yield from violations(shapes, shape["value"]["shape"], item, (*path, key))
        return
    if kind == "string" and isinstance(value, str):
        if "max" in shape and len(value) > shape["max"]:
            yield path, f"is {len(value)} characters; at most {shape['max']} ({name})"
        elif "min" in shape and len(value) < shape["min"]:
            yield path, f"is {len(value)} characters; at least {shape['min']} ({name})"
        elif "pattern" in shape and matches(shape["pattern"], value) is False:
            yield path, f"{value[:60]!r} does not match ^{shape['pattern']}$ ({name})"
        return
    if kind in ("integer", "long") and isinstance(value, int):
        if "max" in shape and value > shape["max"]:
            yield path, f"is {value}; at most {shape['max']} ({name})"
        if "min" in shape and value < shape["min"]:
            yield path, f"is {value}; at least {shape['min']} ({name})"


def request_violations(service: str, operation: str, request: dict) -> List[Tuple[Path_, str]]:
    """Every limit of ``operation``'s model that ``request`` breaks; [] without botocore."""
    found = input_shape(service, operation)
    if found is None:
        return []
    shapes, name = found
    return list(violations(shapes, name, request))
