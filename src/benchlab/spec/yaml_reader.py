"""YAML text to plain data, read once, with the line of every key and item, within limits.

The text is read as a stream of parser events (libyaml's C parser where PyYAML has
it, else PyYAML's own) and built into dicts, lists and scalars in one pass that
needs no recursion. On the way it keeps each key's and item's line for error
messages, and enforces the limits that keep a hostile or broken file from
exhausting the machine:

- a file larger than ``MAX_BYTES`` is refused before it is read;
- nesting deeper than ``MAX_DEPTH`` levels is refused as soon as it is seen;
- aliases (``*name``) may not grow the document past twice its written size
  (and ``ALIAS_ALLOWANCE`` nodes at least), which stops "billion laughs" files
  before anything is expanded.

Scalars are read as YAML 1.1 reads them (PyYAML's safe rules), except that a
plain number with an exponent and no dot (``1e-3``), which YAML 1.1 leaves a
string, is marked as such (``ExponentText``) so that the spec can read it as the
number it is in params and variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml import events

from benchlab.errors import UserError
from benchlab.spec.quoting import EXPONENT_FLOAT

#: Largest spec file read, in bytes. A hand-written spec is a few kilobytes; a generated one
#: with 100,000 configs is about 7 MB.
MAX_BYTES = 8 * 1024 * 1024
#: Deepest nesting of mappings and lists allowed; a spec is rarely more than six levels deep.
MAX_DEPTH = 64
#: Nodes that aliases may add to a document, at the least (else up to its written size).
ALIAS_ALLOWANCE = 100_000

_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels; a spec is a few levels of mappings and lists"

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR = "tag:yaml.org,2002:str"
_MAP_TAGS = (None, "!", "tag:yaml.org,2002:map")
_SEQ_TAGS = (None, "!", "tag:yaml.org,2002:seq")


class ExponentText(str):
    """A plain scalar such as ``1e-3``: a string to YAML 1.1, a number to the spec's params."""


class YamlProblem(UserError):
    """The text cannot be read (syntax, a limit, an unsupported tag): where, and what is wrong."""

    def __init__(self, line: int | None, message: str):
        self.line = line
        self.message = message
        super().__init__(message)


@dataclass
class Lines:
    """Where a mapping or list was written: its own line and each key's or item's line.

    ``children`` maps a key (or an item's index) to the line of a scalar, or to the
    ``Lines`` of a nested mapping or list.
    """

    line: int
    children: dict[Any, int | Lines] = field(default_factory=dict)

    def line_for(self, loc: tuple[Any, ...]) -> int:
        """The line of the deepest part of ``loc`` that was written in the file."""
        where: Lines = self
        for part in loc:
            child = where.children.get(part)
            if child is None:
                break
            if isinstance(child, int):
                return child
            where = child
        return where.line


@dataclass
class Document:
    """A YAML document read: its data, where each part was written, and the duplicate keys."""

    data: Any
    lines: Lines
    # (the path of the mapping, the key, the line of its repeat, the line of its first use)
    duplicates: list[tuple[tuple[Any, ...], Any, int, int]] = field(default_factory=list)


class _Frame:
    """A mapping or list being built."""

    __slots__ = ("value", "lines", "key", "key_line", "size", "anchor", "merges", "path")

    def __init__(self, value: Any, lines: Lines, anchor: str | None, path: tuple[Any, ...]):
        self.value = value
        self.lines = lines
        self.key: Any = _NO_KEY
        self.key_line = 0
        self.size = 1
        self.anchor = anchor
        self.merges: list[tuple[Any, int | Lines]] = []
        self.path = path


_NO_KEY = object()
_MERGE = object()


def read_yaml(text: str) -> Document:
    """Read one YAML document; raise ``YamlProblem`` for text that cannot be read."""
    if len(text) > MAX_BYTES:
        raise YamlProblem(None, f"is {len(text) / 2**20:.1f} MB; a spec may be at most "
                                f"{MAX_BYTES // 2**20} MB (see docs/spec.md, 'Limits')")
    try:
        return _build(text)
    except yaml.MarkedYAMLError as exc:
        mark: Any = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        if "nesting depth" in problem:
            # libyaml (from 0.2.5, as PyYAML 6.0.4 builds it) stops deep nesting itself, before the
            # events reach our own check: the user gets one message whichever layer refuses.
            raise YamlProblem(line, _TOO_DEEP) from None
        raise YamlProblem(line, f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:
        raise YamlProblem(None, f"YAML syntax error: {exc}") from None


def _build(text: str) -> Document:
    # long: one pass over the parser's events that keeps every piece of state (the open frames, the
    # anchors, the limits' counters) in locals of one loop, run once per event of the file: split
    # into functions, that state would travel through arguments and a call per event.
    resolver = yaml.resolver.Resolver()
    resolve = resolver.resolve
    implicit_starts = frozenset(k for k in resolver.yaml_implicit_resolvers if k)
    constructor = yaml.constructor.SafeConstructor()
    plain_cache: dict[str, Any] = {}
    anchors: dict[str, tuple[Any, int | Lines, int]] = {}  # anchor -> (value, lines, size)
    stack: list[_Frame] = []
    root: Any = None
    root_lines: Lines = Lines(1)
    duplicates: list[tuple[tuple[Any, ...], Any, int, int]] = []
    written = 0
    expanded = 0
    documents = 0
    scalar_event, alias_event = events.ScalarEvent, events.AliasEvent
    mapping_start, sequence_start = events.MappingStartEvent, events.SequenceStartEvent
    mapping_end, sequence_end = events.MappingEndEvent, events.SequenceEndEvent

    ev: Any
    for ev in yaml.parse(text, Loader=_LOADER):
        cls = ev.__class__
        line = ev.start_mark.line + 1
        if cls is scalar_event:
            written += 1
            size = 1
            tag = ev.tag
            raw = ev.value
            plain = tag is None and ev.implicit[0]
            if plain and (not raw or raw[0] not in implicit_starts):
                # Most scalars are words: a plain scalar whose first character starts no implicit
                # type (numbers, booleans, null, dates, merge) is a string without asking the resolver.
                value: Any = raw if raw else None
            elif plain and raw in plain_cache:
                value = plain_cache[raw]
            elif tag is None or tag == "!" or tag == _STR:
                tag = resolve(yaml.ScalarNode, raw, ev.implicit) if tag != _STR else tag
                if tag == _STR:
                    value = ExponentText(raw) if plain and EXPONENT_FLOAT.match(raw) else raw
                elif (tag == "tag:yaml.org,2002:merge" and stack and isinstance(stack[-1].value, dict)
                      and stack[-1].key is _NO_KEY):
                    value = _MERGE
                else:
                    value = _construct(constructor, tag, raw, line)
                if plain and value is not _MERGE:
                    plain_cache[raw] = value
            else:
                value = _construct(constructor, tag, raw, line)
            value_lines: int | Lines = line
            if ev.anchor is not None:
                anchors[ev.anchor] = (value, line, 1)
        elif cls is mapping_start or cls is sequence_start:
            if len(stack) >= MAX_DEPTH:
                raise YamlProblem(line, _TOO_DEEP)
            if ev.tag not in (_MAP_TAGS if cls is mapping_start else _SEQ_TAGS):
                raise YamlProblem(line, f"unsupported YAML tag {ev.tag!r}; a spec holds plain "
                                        "values, mappings and lists")
            written += 1
            parent = stack[-1] if stack else None
            path = () if parent is None else (*parent.path, _child_key(parent))
            if parent is not None and parent.key is _NO_KEY and isinstance(parent.value, dict):
                raise YamlProblem(line, "a mapping key must be a plain value, not a mapping or list")
            own_line = parent.key_line if parent is not None and isinstance(parent.value, dict) else line
            stack.append(_Frame({} if cls is mapping_start else [], Lines(own_line), ev.anchor, path))
            continue
        elif cls is mapping_end or cls is sequence_end:
            frame = stack.pop()
            if frame.merges:
                _apply_merges(frame)
            value, value_lines, size = frame.value, frame.lines, frame.size
            if frame.anchor is not None:
                anchors[frame.anchor] = (value, value_lines, size)
        elif cls is alias_event:
            found = anchors.get(ev.anchor)
            if found is None:
                raise YamlProblem(line, f"alias *{ev.anchor} names no anchor defined before it")
            value, value_lines, size = found
            expanded += size
            if expanded > max(ALIAS_ALLOWANCE, written):
                raise YamlProblem(line, f"aliases expand the document past {max(ALIAS_ALLOWANCE, written):,} "
                                        "more values than it holds; write the repeated parts out, or "
                                        "use a grid or variables")
        elif cls is events.DocumentStartEvent:
            documents += 1
            if documents > 1:
                raise YamlProblem(line, "expected one YAML document, found a second one ('---')")
            continue
        else:
            continue

        if not stack:
            root, root_lines = value, (value_lines if isinstance(value_lines, Lines) else Lines(value_lines))
            continue
        top = stack[-1]
        top.size += size
        container = top.value
        if container.__class__ is list:
            top.lines.children[len(container)] = value_lines
            container.append(value)
        elif top.key is _NO_KEY:
            if isinstance(value, ExponentText):
                value = str(value)
            try:
                hash(value)
            except TypeError:
                raise YamlProblem(line, "a mapping key must be a plain value") from None
            top.key, top.key_line = value, line
        elif top.key is _MERGE:
            top.merges.append((value, value_lines))
            top.key = _NO_KEY
        else:
            key = top.key
            if key in container:
                first = top.lines.children[key]
                duplicates.append((top.path, key, top.key_line, first if isinstance(first, int) else first.line))
            container[key] = value
            if isinstance(value_lines, Lines):
                value_lines = Lines(top.key_line, value_lines.children)
            else:
                value_lines = top.key_line
            top.lines.children[key] = value_lines
            top.key = _NO_KEY
    return Document(root, root_lines, duplicates)


def _construct(constructor: Any, tag: str, raw: str, line: int) -> Any:
    """A scalar of an explicit or resolved ``tag`` (int, float, bool, null, timestamp) as PyYAML's
    safe loader builds it; any other tag is refused."""
    make = constructor.yaml_constructors.get(tag)
    if make is None or tag in ("tag:yaml.org,2002:binary", "tag:yaml.org,2002:merge"):
        raise YamlProblem(line, f"unsupported YAML tag {tag!r}; a spec holds plain values, mappings and lists")
    try:
        return make(constructor, yaml.ScalarNode(tag, raw))
    except (ValueError, yaml.YAMLError) as exc:
        raise YamlProblem(line, f"cannot read {raw!r} as {tag.rsplit(':', 1)[-1]}: {exc}") from None


def _child_key(frame: _Frame) -> Any:
    return len(frame.value) if isinstance(frame.value, list) else frame.key


def _apply_merges(frame: _Frame) -> None:
    """YAML merge keys (``<<: *defaults``): keys written in the mapping win over merged ones."""
    for value, lines in frame.merges:
        sources = value if isinstance(value, list) else [value]
        source_lines = lines.children if isinstance(lines, Lines) and isinstance(value, list) else {}
        for i, source in enumerate(sources):
            if not isinstance(source, dict):
                raise YamlProblem(frame.lines.line, "'<<' merges mappings only")
            where = source_lines.get(i, lines) if source_lines else lines
            children = where.children if isinstance(where, Lines) else {}
            for key, item in source.items():
                if key not in frame.value:
                    frame.value[key] = item
                    frame.lines.children[key] = children.get(key, frame.lines.line)
