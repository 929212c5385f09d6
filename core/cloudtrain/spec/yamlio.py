"""YAML in and out, through libyaml when PyYAML has it (the C parser and emitter are about ten
times faster than the pure-Python ones: a Kubernetes render carries the launcher's source in a
ConfigMap, and emitting it was most of ``cloudtrain render``'s own time).

``read`` is how cloudtrain reads YAML that a user wrote (job files, ``--set`` values).  It takes
libyaml's events and builds the data itself, so a hostile file cannot hurt: no tag constructs an
object (only plain YAML's own are accepted), aliases cannot expand past ``MAX_VALUES`` values
("billion laughs") nor refer to themselves, nesting stops at ``MAX_DEPTH``, a key given twice
in one mapping is reported, and one file holds one document.  Mapping keys are strings as
written; every scalar that YAML 1.1 would read as a number or a boolean keeps its text too, so a
field that wants a string can take it as the user wrote it (``1.10``, ``0755``, ``on``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import yaml
from yaml.events import (AliasEvent, DocumentStartEvent, MappingEndEvent, MappingStartEvent, ScalarEvent,
                         SequenceEndEvent, SequenceStartEvent, StreamEndEvent)

# Any: the libyaml classes when PyYAML was built with them, else the pure-Python ones
Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Emitter: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

MAX_DEPTH = 64          # nesting levels (a job file needs about ten)
MAX_VALUES = 100_000    # values, counting each one an alias repeats

_TAG = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL, MAP, SEQ, MERGE = (_TAG + t for t in
                                                ("str", "int", "float", "bool", "null", "map", "seq", "merge"))
_SCALAR_TAGS = {STR, INT, FLOAT, BOOL, NULL}
# What YAML allows in a stream (YAML 1.1 §5.1), as a character class of everything else.
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class Dumper(_Emitter):
    """Safe YAML; a string with line breaks is written as a literal block (``|``), so scripts
    and files in a rendered request read as they are (the emitter falls back to quotes where a
    block cannot hold the text exactly)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


Dumper.add_representer(str, _represent_str)


WIDTH = 100


def dump(data: Any, width: int = WIDTH) -> str:
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=width)


_IMPLICIT = {first: [(tag, rx) for tag, rx in resolvers if tag not in (_TAG + "timestamp", _TAG + "value")]
             for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


class _Reader(Loader):
    """libyaml's parser with YAML 1.1's implicit types minus timestamps and ``=``: a date stays
    the text it was (nothing in a job is a date), and ``=`` is text, not a tag with no value."""

    yaml_implicit_resolvers = _IMPLICIT


class _PyReader(yaml.SafeLoader):
    """PyYAML's own parser with the same types.  ``read`` asks it about a text libyaml refused:
    libyaml's limits and wording change between its releases (0.2.6 refuses flow nesting past
    1000 levels in its scanner, before any event reaches ``_Builder``); this parser has no such
    limit and hands out events as it goes, so the rules above, not libyaml's, say what is wrong."""

    yaml_implicit_resolvers = _IMPLICIT


class YamlProblem(ValueError):
    """Why a text is not acceptable YAML; ``line`` is 1-based (None when unknown).  ``syntax`` is
    true for a plain syntax error (as opposed to a rejected structure: tags, aliases, ...)."""

    def __init__(self, message: str, line: Optional[int] = None, *, syntax: bool = False):
        super().__init__(message)
        self.message, self.line, self.syntax = message, line, syntax


@dataclass
class Document:
    """One YAML document as data, with where each value was written.

    ``lines``: ``{(key, index, ...): line}`` for every mapping key and sequence item (and ``()``:
    the first line of the document's value).  ``texts``: the scalars read as numbers or booleans,
    ``{path: text as written}``.  ``duplicates``: ``(path, line, first_line)`` of each key given
    again in the same mapping (the data holds the last one)."""

    data: Any
    lines: Dict[tuple, int] = field(default_factory=dict)
    texts: Dict[tuple, str] = field(default_factory=dict)
    duplicates: List[Tuple[tuple, int, int]] = field(default_factory=list)


def read(text: str) -> Document:
    """Read the one document of a user's YAML text; raises ``YamlProblem``."""
    bad = _NOT_PRINTABLE.search(text)
    if bad:
        char = bad.group()
        what = "a NUL byte" if char == "\0" else f"the control character {char!r}"
        raise YamlProblem(f"contains {what}, which YAML does not allow; is it a binary file? "
                          "A job file is YAML text", text.count("\n", 0, bad.start()) + 1)
    try:
        return _build(_Reader, text)
    except yaml.YAMLError:
        pass  # libyaml refused it: PyYAML's own parser says why (``_PyReader``), or reads it
    try:
        return _build(_PyReader, text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or ""
        raise YamlProblem(f"invalid YAML: {problem}{syntax_hint(problem)}", mark.line + 1 if mark else None,
                          syntax=True) from None
    except yaml.YAMLError as exc:  # a reader error (the check above should have caught it)
        raise YamlProblem(f"invalid YAML: {str(exc).splitlines()[0]}", syntax=True) from None


def syntax_hint(problem: str) -> str:
    """What usually fixes the YAML syntax errors people meet in a job file (docs/job-file.md)."""
    if "'\\t'" in problem or "\t" in problem:
        return "; YAML indents with spaces, never tabs: replace the tab with spaces"
    if "mapping values are not allowed" in problem:
        return ("; a value that holds ': ' (a colon and a space) must be quoted, e.g. command: \"python t.py --x: 1\", "
                "or written as a list")
    if "cannot start any token" in problem:
        return "; a value that starts with this character must be quoted, e.g. image: \"@team/img\""
    return ""


def _build(reader, text: str) -> Document:
    loader = reader(text)
    try:
        return _Builder(loader).document()
    finally:
        loader.dispose()


def load(text: str) -> Any:
    """The data of a user's YAML text (``read`` without the line marks)."""
    return read(text).data


def short_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


@dataclass
class _Anchor:
    value: Any
    size: int            # values it counts for where an alias repeats it
    height: int          # nesting levels it adds
    lines: list          # [(path relative to it, line)]
    texts: list


class _Open:
    """A mapping or sequence whose end has not been read yet."""

    __slots__ = ("value", "path", "anchor", "key", "seen", "merges", "lines_at", "texts_at", "counted_at",
                 "height")

    def __init__(self, value, path, anchor, builder: "_Builder"):
        self.value, self.path, self.anchor = value, path, anchor
        self.key = None                  # mappings: the key whose value comes next
        self.seen: Dict[str, Optional[int]] = {}   # mappings: key -> line
        self.merges: list = []           # mappings: [source, lines_at, texts_at, line] of each `<<`
        self.lines_at, self.texts_at = len(builder.lines), len(builder.texts)
        self.counted_at = builder.counted
        self.height = 1


_MERGE_KEY = object()  # the path part under which a `<<` value is read


class _Builder:
    """Data from libyaml's events, one pass, no recursion (see the module's docstring)."""

    def __init__(self, loader):
        self.loader = loader
        self.stack: List[_Open] = []
        self.anchors: Dict[str, _Anchor] = {}
        self.open_anchors: set = set()
        self.lines: list = []
        self.texts: list = []
        self.duplicates: list = []
        self.counted = 0
        self.root: Any = None
        self.root_line: Optional[int] = None
        self.finished = False
        self.merged = False

    def document(self) -> Document:
        get = self.loader.get_event
        get()  # stream start
        if self.loader.check_event(StreamEndEvent):
            return Document(None)
        get()  # document start
        while True:
            event = get()
            if isinstance(event, ScalarEvent):
                self.add(*self.scalar(event), event)
            elif isinstance(event, AliasEvent):
                self.alias(event)
            elif isinstance(event, (MappingStartEvent, SequenceStartEvent)):
                self.start(event)
            elif isinstance(event, (MappingEndEvent, SequenceEndEvent)):
                self.end(event)
            if self.finished:
                break
        get()  # document end
        if self.loader.check_event(DocumentStartEvent):
            raise YamlProblem("a second YAML document starts here; a job file is one document: remove this "
                              "'---' and what follows, or split the file", _line(self.loader.peek_event()))
        lines, texts = dict(self.lines), dict(self.texts)
        if self.merged:  # drop the marks filed under `<<` (the merged values have their own now)
            lines = {path: line for path, line in lines.items() if _MERGE_KEY not in path}
            texts = {path: text for path, text in texts.items() if _MERGE_KEY not in path}
        lines[()] = self.root_line
        return Document(self.root, lines, texts, self.duplicates)

    # -- one value ---------------------------------------------------------------------------
    def scalar(self, event) -> Tuple[Any, Optional[str]]:
        """``(value, text)``: text is the scalar as written when it was read as a number or bool."""
        tag = event.tag
        if self.stack and isinstance(self.stack[-1].value, dict) and self.stack[-1].key is None:
            if tag is None and event.implicit[0] and event.value == "<<":
                return _MERGE_KEY, None
            if tag not in (None, "!") and tag != STR:
                self.refuse_tag(tag, event, "a mapping key is a string, written without a tag")
            return event.value, None
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, event.value, (event.implicit[0], False)) \
                if tag is None else STR
            if tag == MERGE:
                tag = STR
        elif tag not in _SCALAR_TAGS:
            self.refuse_tag(tag, event, "a value is a string, number, true/false or null, written without a tag")
        if tag == STR:
            return event.value, None
        try:
            value = self.loader.yaml_constructors[tag](self.loader, yaml.ScalarNode(tag, event.value))
        except (ValueError, KeyError):
            if event.tag is not None:
                raise YamlProblem(f"{event.value!r} is not a valid {short_tag(tag)}; remove the tag or fix "
                                  "the value", _line(event)) from None
            return event.value, None  # looks like a number to YAML 1.1's pattern, is not one: text
        return value, (None if value is None else event.value)

    def refuse_tag(self, tag: str, event, what: str):
        raise YamlProblem(f"the tag {short_tag(tag)} is not allowed: {what} (quote a value that starts "
                          "with '!')", _line(event))

    def alias(self, event) -> None:
        name = event.anchor
        if name in self.open_anchors:
            raise YamlProblem(f"the alias *{name} is inside the value &{name} it refers to (a recursive "
                              "alias); repeat the values instead", _line(event))
        anchor = self.anchors.get(name)
        if anchor is None:
            raise YamlProblem(f"the alias *{name} refers to no anchor &{name} above it; define the "
                              "anchor first", _line(event))
        if self.stack and isinstance(self.stack[-1].value, dict) and self.stack[-1].key is None:
            if not isinstance(anchor.value, str):
                raise YamlProblem(f"the alias *{name} is used as a mapping key; a key is a string", _line(event))
            self.add(anchor.value, None, event)
            return
        self.count(anchor.size, event)
        if len(self.stack) + anchor.height > MAX_DEPTH:
            self.too_deep(event)
        path = self.path_of_next()
        if isinstance(self.stack[-1].value, list):
            self.lines.append((path, _line(event)))
        self.lines.extend((path + rel, line) for rel, line in anchor.lines)
        self.texts.extend((path + rel, text) for rel, text in anchor.texts)
        self.attach(anchor.value, anchor.height)

    def start(self, event) -> None:
        is_map = isinstance(event, MappingStartEvent)
        if self.stack and isinstance(self.stack[-1].value, dict) and self.stack[-1].key is None:
            raise YamlProblem(f"a {'mapping' if is_map else 'list'} is used as a mapping key; a key is a "
                              "string", _line(event))
        if event.tag not in (None, "!", MAP if is_map else SEQ):
            self.refuse_tag(event.tag, event, "mappings and lists are written without tags")
        if len(self.stack) >= MAX_DEPTH:
            self.too_deep(event)
        self.count(1, event)
        path = self.path_of_next()
        if not self.stack:
            self.root_line = _line(event)
        elif isinstance(self.stack[-1].value, list):
            self.lines.append((path, _line(event)))
        opened = _Open({} if is_map else [], path, event.anchor, self)
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        self.stack.append(opened)

    def end(self, event) -> None:
        done = self.stack.pop()
        if isinstance(done.value, dict):
            self.merge(done)
        if done.anchor is not None:
            self.open_anchors.discard(done.anchor)
            cut = len(done.path)
            self.anchors[done.anchor] = _Anchor(
                done.value, self.counted - done.counted_at + 1, done.height,
                [(p[cut:], line) for p, line in self.lines[done.lines_at:]],
                [(p[cut:], text) for p, text in self.texts[done.texts_at:]])
        if self.stack:
            self.attach(done.value, done.height)
        else:
            self.root, self.finished = done.value, True

    def add(self, value, text, event) -> None:
        """A scalar (or a scalar's alias) read at the current position."""
        top = self.stack[-1] if self.stack else None
        if top is not None and isinstance(top.value, dict) and top.key is None:
            line = _line(event)
            if value is not _MERGE_KEY:
                first = top.seen.get(value)
                if first is not None:
                    self.duplicates.append((top.path + (value,), line, first))
                top.seen[value] = line
                self.lines.append((top.path + (value,), line))
                if isinstance(event, ScalarEvent) and event.anchor is not None:
                    self.anchors[event.anchor] = _Anchor(value, 1, 0, [], [])
            else:
                top.merges.append([None, len(self.lines), len(self.texts), line])
                self.merged = True
            top.key = value
            return
        self.count(1, event)
        path = self.path_of_next()
        if top is None:
            self.root, self.root_line, self.finished = value, _line(event), True
        elif isinstance(top.value, list):
            self.lines.append((path, _line(event)))
        if text is not None:
            self.texts.append((path, text))
        if event.anchor is not None:
            self.anchors[event.anchor] = _Anchor(value, 1, 0, [], [((), text)] if text is not None else [])
        if top is not None:
            self.attach(value, 0)

    def attach(self, value, height: int) -> None:
        """Put a finished value into the open collection on top of the stack."""
        top = self.stack[-1]
        top.height = max(top.height, height + 1)
        if isinstance(top.value, list):
            top.value.append(value)
        elif top.key is _MERGE_KEY:
            top.merges[-1][0] = value
            top.key = None
        else:
            top.value[top.key] = value
            top.key = None

    def path_of_next(self) -> tuple:
        if not self.stack:
            return ()
        top = self.stack[-1]
        return top.path + ((len(top.value),) if isinstance(top.value, list) else (top.key,))

    def merge(self, done: _Open) -> None:
        """``<<: *base`` or ``<<: [*a, *b]``: the keys the mapping does not set itself, earlier
        sources first (YAML's merge key)."""
        base = done.path + (_MERGE_KEY,)
        for source, lines_at, texts_at, line in done.merges:
            listed = isinstance(source, list)
            sources = source if listed else [source]
            if not all(isinstance(s, dict) for s in sources):
                raise YamlProblem("'<<' merges a mapping (or a list of mappings) into this one; give it "
                                  "one, e.g. <<: *defaults", line)
            taken = {}
            for i, src in enumerate(sources):
                for key, value in src.items():
                    if key not in done.value:
                        done.value[key] = value
                        taken[key] = i
            # where the merged values were written: re-file their marks under this mapping
            skip = len(base) + (1 if listed else 0)
            for marks, at in ((self.lines, lines_at), (self.texts, texts_at)):
                for path, mark in marks[at:]:
                    if path[:len(base)] == base and len(path) > skip and \
                            taken.get(path[skip]) == (path[len(base)] if listed else 0):
                        marks.append((done.path + path[skip:], mark))

    def count(self, n: int, event) -> None:
        self.counted += n
        if self.counted > MAX_VALUES:
            raise YamlProblem(f"more than {MAX_VALUES} values, counting each one its aliases repeat (an "
                              "alias bomb?); a job file is far smaller: write the values out", _line(event))

    def too_deep(self, event):
        raise YamlProblem(f"nested more than {MAX_DEPTH} levels deep; a job file needs about ten",
                          _line(event))


def _line(event) -> Optional[int]:
    mark = getattr(event, "start_mark", None)
    return mark.line + 1 if mark is not None else None
