"""What a render makes and a submit sends: each provider's typed request.

torchx's schedulers hand ``schedule`` the typed request their dry run made
(``AppDryRunInfo[BatchJob]``); cloudtrain does the same:

- ``Request``: the base of a provider's request (a frozen dataclass per provider, e.g.
  ``TioneRequest``).  ``render`` builds it (pure); ``schedule`` reads its fields directly; what a
  render prints (``artifacts()``) is derived from it, never searched by kind at submit.
- ``Rendered[R]``: the job, its options and the provider's request ``R``.
- ``Placeholder`` and ``fill``: the values only a submit knows (the spec hash, the shipped code's
  digest and URL, a local run's id), written one way in every request and filled in by one
  function; a value goes into a string as that string's format needs (``ShellText``: shell-quoted;
  ``JsonText``: JSON-escaped; any other string: as it is).
- ``CodeUpload``: where a submit puts the job's code archive; core ships it (``CloudProvider``).
"""
from __future__ import annotations

import abc
import dataclasses
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, Generic, List, Mapping, Optional, TypeVar

from ..spec import yamlio
from ..spec.job import JobSpec


class Placeholder:
    """What a render shows for a value only a submit knows; ``fill`` replaces it."""

    SPEC_HASH = "<spec-hash>"      # sha256 of the rendered request and the code (``cloud.spec_hash``)
    CODE_DIGEST = "<code-digest>"  # sha256 of the shipped archive (its object's name)
    CODE_URL = "<code-url>"        # where the archive was shipped (``CodeUpload.url`` filled in)
    RUN_ID = "<run-id>"            # a local run's id (local, docker)


@dataclass(frozen=True)
class Artifact:
    """One thing a provider will send, as a render prints it: ``kind`` says what ``content`` is."""

    kind: str
    name: str
    content: Any


class ShellText(str):
    """A shell script or command line: a value filled into it is shell-quoted (``shlex.quote``),
    so the placeholder stands where one shell word goes, unquoted."""

    fill_encoding: ClassVar[Callable[[str], str]] = staticmethod(shlex.quote)


class JsonText(str):
    """A JSON document held as a string (an environment variable's value, a hyperparameter): a
    value filled into it is JSON-escaped, so the placeholder stands inside a JSON string."""

    fill_encoding: ClassVar[Callable[[str], str]] = staticmethod(lambda value: json.dumps(value)[1:-1])


T = TypeVar("T")


def fill(content: T, values: Mapping[str, str]) -> T:
    """``content`` with every placeholder (a key of ``values``) replaced by its value: a copy,
    through dataclasses (``dataclasses.replace``), dicts, lists and tuples; in a ``ShellText`` or
    ``JsonText`` the value is encoded for it, in any other string it goes as it is.  One pass:
    a value that holds a placeholder's text is never filled in again."""
    if not values:
        return content
    pattern = re.compile("|".join(re.escape(k) for k in sorted(values, key=len, reverse=True)))
    return _fill(content, values, pattern)


def _fill(content: Any, values: Mapping[str, str], pattern: "re.Pattern[str]") -> Any:
    if isinstance(content, str):
        encode = getattr(type(content), "fill_encoding", None)
        text = pattern.sub(lambda m: encode(values[m.group()]) if encode else values[m.group()], content)
        return type(content)(text) if type(content) is not str else text
    if dataclasses.is_dataclass(content) and not isinstance(content, type):
        changes = {f.name: _fill(getattr(content, f.name), values, pattern)
                   for f in dataclasses.fields(content) if f.init}
        return dataclasses.replace(content, **changes)
    if isinstance(content, dict):
        return type(content)((_fill(k, values, pattern), _fill(v, values, pattern)) for k, v in content.items())
    if isinstance(content, list):
        return [_fill(v, values, pattern) for v in content]
    if isinstance(content, tuple):
        return type(content)(_fill(v, values, pattern) for v in content)
    return content


@dataclass(frozen=True)
class CodeUpload:
    """Where a submit puts the job's code archive (the code and the launcher bundle):
    ``url`` is an object-store URL holding ``Placeholder.CODE_DIGEST`` (content-addressed: the same
    code is one object), e.g. ``s3://bucket/prefix/cloudtrain-code/<code-digest>.tar.gz``;
    ``region`` and ``endpoint`` go to the store's constructor (``objectstore.open_store``)."""

    url: str
    region: Optional[str] = None
    endpoint: Optional[str] = None


@dataclass(frozen=True)
class Shipped:
    """A code archive a submit put in an object store."""

    url: str
    digest: str


class Request(abc.ABC):
    """Base of a provider's typed request (subclass it as a frozen dataclass).

    ``artifacts`` says what the request is, for a render to print (the platform's calls and
    their bodies, in the order a submit makes them); ``code_upload`` where a submit ships the
    code (None: the code travels inside the request, comes from elsewhere, or from the image)."""

    @abc.abstractmethod
    def artifacts(self) -> List[Artifact]:
        """What the request is, as a render prints it."""

    @property
    def code_upload(self) -> Optional[CodeUpload]:
        return None


R = TypeVar("R", bound=Request)


@dataclass
class Rendered(Generic[R]):
    """The exact platform request for a job: the provider's typed ``request``; prints as YAML or
    as the JSON envelope of its artifacts."""

    provider: str
    job: JobSpec
    request: R
    options: Any = None
    checked: bool = False  # the preflight checks ran (render(job, submit=True))

    @property
    def artifacts(self) -> List[Artifact]:
        return self.request.artifacts()

    def envelope(self) -> Dict[str, Any]:
        return {"provider": self.provider, "job": self.job.name,
                "artifacts": [{"kind": a.kind, "name": a.name, "content": a.content} for a in self.artifacts]}

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.envelope(), indent=indent, sort_keys=False, ensure_ascii=False)

    def to_yaml(self) -> str:
        docs = []
        for a in self.artifacts:
            head = f"# {a.kind}: {a.name}\n"
            if isinstance(a.content, str):
                docs.append(head + a.content.rstrip("\n") + "\n")
            else:
                docs.append(head + yamlio.dump(a.content))
        return "---\n".join(docs)

    def to_text(self) -> str:
        """What ``render`` shows a person: ``to_yaml`` with the platform's request first and every
        file shipped to the nodes (the launcher) as its size and sha256 (``shipped``)."""
        from .shipped import to_text
        return to_text(self.artifacts)

    def __str__(self) -> str:
        return self.to_yaml()
