"""manifest.json read a key at a time and written as it is encoded, so that its lists that grow with
the archive (the unassigned facts, the inputs) are never parsed or held whole by a run that does not
need them (docs/performance.md, "The final stage at scale").

A manifest is written with an indent of two spaces, as `json.dump(manifest, indent=2)` writes it:
each top-level key begins a line with exactly two spaces and a quote, which no other line does (a
nested key or item is indented further, a JSON string holds no raw newline, and the fragments DuckDB
writes begin their lines with a tab). `index` finds those lines a chunk at a time and gives each
top-level value's byte range (`Span`); `read` parses the values wanted and leaves the others as
spans, which `write` copies byte for byte. A manifest not laid out so (edited by hand, written on
one line) is parsed whole, as before.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20
# the top-level values that grow with the archive: an entry per input file, skipped path, unassigned
# fact, part file, absent file (export_report.retention)
GROWING = ("inputs", "skipped", "_meta", "files", "export_report")
# a top-level key's line: a newline, two spaces, the key as a JSON string, a colon and a space
_KEY = re.compile(rb'\n  ("(?:[^"\\\n]|\\.)*"): ')
_SPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Span:
    """A value's JSON text, bytes [start, end) of the file `path` (a manifest, a fragment DuckDB wrote)."""

    path: Path
    start: int
    end: int

    def copy_to(self, out) -> None:
        """Write the text to the text file `out`, a chunk at a time."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        with self.path.open("rb") as fh:
            fh.seek(self.start)
            left = self.end - self.start
            while left > 0:
                data = fh.read(min(CHUNK, left))
                if not data:
                    raise ValueError(f"{self.path} is shorter than when it was read")
                left -= len(data)
                out.write(decoder.decode(data, final=left <= 0))

    def parse(self) -> object:
        with self.path.open("rb") as fh:
            fh.seek(self.start)
            return json.loads(fh.read(self.end - self.start))


@dataclass(frozen=True)
class Pieces:
    """A value written as text and spans in order (an object around a fragment DuckDB wrote)."""

    parts: tuple[str | Span, ...]


def index(path: Path) -> dict[str, Span] | None:
    """Each top-level key of the manifest `path` with its value's span, in the file's order; None when
    the file is not laid out as `write` lays it out (then it is parsed whole)."""
    starts: list[tuple[str, int, int]] = []  # key, where its line begins, where its value begins
    with path.open("rb") as fh:
        if fh.read(1) != b"{":
            return None
        fh.seek(0)
        offset, carry = 0, b""
        while True:
            data = fh.read(CHUNK)
            if not data:
                break
            text = carry + data
            base = offset - len(carry)
            last = 0
            for m in _KEY.finditer(text):
                if m.end() == len(text):  # the value's first byte is in the next chunk: found again there
                    break
                starts.append((json.loads(m.group(1)), base + m.start(), base + m.end()))
                last = m.end()
            carry = text[max(last, len(text) - 4096):]
            offset += len(data)
        size = offset
        # each value ends before the comma that precedes the next key; the last before the closing brace
        ends = [s for _, s, _ in starts[1:]] + [size]
        spans = {}
        for (key, _, start), end in zip(starts, ends):
            fh.seek(max(start, end - 64))
            tail = fh.read(end - max(start, end - 64))
            stripped = tail.rstrip()
            if end == size:
                if not stripped.endswith(b"}"):
                    return None
                stripped = stripped[:-1].rstrip()
            elif not stripped.endswith(b","):
                return None
            else:
                stripped = stripped[:-1]
            spans[key] = Span(path, start, end - len(tail) + len(stripped))
    # keys found twice (a key's text inside a value): not a manifest laid out as written here
    return spans if spans and len(spans) == len(starts) else None


def read(path: Path, *, keep: tuple[str, ...] = ()) -> dict:
    """The manifest `path` with each top-level value parsed, but those of `keep`, left as spans of the
    file; parsed whole when it is not laid out as `write` writes it. ValueError when it is not JSON."""
    spans = index(path)
    if spans is None:
        value = json.loads(path.read_bytes())
        if not isinstance(value, dict):
            raise ValueError(f"{path} is not a JSON object")
        return value
    return {key: span if key in keep else span.parse() for key, span in spans.items()}


def read_keys(path: Path, keys: tuple[str, ...]) -> dict:
    """The values of `keys` in the manifest `path` (those it has), parsed; the others not read."""
    spans = index(path)
    if spans is None:
        value = json.loads(path.read_bytes())
        return {k: value[k] for k in keys if k in value} if isinstance(value, dict) else {}
    return {key: spans[key].parse() for key in keys if key in spans}


def items(path: Path, key: str) -> Iterator[tuple[str, object]]:
    """The items of the top-level object `key` of the manifest `path`, each parsed as it is read, a
    chunk of the file at a time (the part files: an entry per file); none when it has no such key or
    its value is not an object. ValueError when it is not JSON."""
    spans = index(path)
    if spans is None:  # not laid out as `write` lays it out: parsed whole
        whole = json.loads(path.read_bytes())
        value = whole.get(key) if isinstance(whole, dict) else None
        yield from value.items() if isinstance(value, dict) else ()
    elif key in spans:
        with spans[key].path.open("rb") as fh:
            yield from _Reader(fh, spans[key]).items()


class _Reader:
    """The JSON text of a span, decoded a chunk at a time; what is parsed is dropped."""

    def __init__(self, fh, span: Span) -> None:
        fh.seek(span.start)
        self.fh, self.path, self.left = fh, span.path, span.end - span.start
        self.text, self.pos = "", 0
        self.utf8 = codecs.getincrementaldecoder("utf-8")()

    def items(self) -> Iterator[tuple[str, object]]:
        if self._char() != "{":
            return
        if self._char(peek=True) == "}":
            return
        while True:
            key = self._value()
            if not isinstance(key, str):
                raise ValueError(f"{self.path}: an object's key is not a string")
            if self._char() != ":":
                raise ValueError(f"{self.path}: no colon after an object's key")
            yield key, self._value()
            after = self._char()
            if after == "}":
                return
            if after != ",":
                raise ValueError(f"{self.path}: no comma between an object's items")

    def _more(self) -> bool:
        if self.left <= 0:
            return False
        data = self.fh.read(min(CHUNK, self.left))
        if not data:
            raise ValueError(f"{self.path} is shorter than when it was read")
        self.left -= len(data)
        self.text = self.text[self.pos:] + self.utf8.decode(data, final=self.left <= 0)
        self.pos = 0
        return True

    def _char(self, *, peek: bool = False) -> str:
        """The next character that is not white space, read (`peek`: left to read); "" at the end."""
        while True:
            self.pos = _SPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                char = self.text[self.pos]
                self.pos += 0 if peek else 1
                return char
            if not self._more():
                return ""

    def _value(self) -> object:
        """The next JSON value, read on until it is whole (a number at the chunk's end may go on)."""
        while True:
            self.pos = _SPACE.match(self.text, self.pos).end()
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
                if end < len(self.text) or self.left <= 0:
                    self.pos = end
                    return value
            except json.JSONDecodeError:
                if self.left <= 0:
                    raise
            self._more()


def write(path: Path, manifest: dict) -> None:
    """Write `manifest` as `json.dump(manifest, indent=2)` would, its values encoded as they are
    written and its spans and pieces copied: nothing of it is held whole as text."""
    encoder = json.JSONEncoder(indent=2)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("{")
        for i, (key, value) in enumerate(manifest.items()):
            fh.write(("," if i else "") + "\n  " + json.dumps(key) + ": ")
            for part in value.parts if isinstance(value, Pieces) else (value,):
                if isinstance(part, Span):
                    part.copy_to(fh)
                elif isinstance(value, Pieces):
                    fh.write(part)
                else:
                    for chunk in encoder.iterencode(part):
                        fh.write(chunk.replace("\n", "\n  "))
        fh.write("\n}\n")


def around(value: object) -> object:
    """A top-level value that holds spans among its items (a fragment DuckDB wrote, nested in a
    report): the pieces `write` writes of it, its text as `write` encodes it around each span; the
    value itself when it holds none."""
    spans: list[Span] = []

    def marked(v: object) -> object:
        if isinstance(v, Span):
            spans.append(v)
            return f"\0span {len(spans) - 1}\0"
        if isinstance(v, dict):
            return {k: marked(x) for k, x in v.items()}
        return [marked(x) for x in v] if isinstance(v, list) else v

    value_marked = marked(value)
    if not spans:
        return value
    text = json.dumps(value_marked, indent=2).replace("\n", "\n  ")
    pieces = re.split(r'"\\u0000span (\d+)\\u0000"', text)
    return Pieces(tuple(spans[int(p)] if i % 2 else p for i, p in enumerate(pieces)))


def item_text(value: object) -> str:
    """An item of a top-level array as `write` writes it (indented for its depth)."""
    return json.dumps(value, indent=2).replace("\n", "\n    ")


def write_array(path: Path, items: Iterable[str], *, encoded: bool = False) -> Span:
    """Write the JSON array of `items` (each an item's JSON text; `encoded`: as `item_text` gives it,
    written as it is) to the file `path` as `write` writes a top-level value, an item at a time, and
    return its span: a value the run holds as text until the manifest is written (the inputs)."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[")
        n = 0
        for n, text in enumerate(items, 1):
            fh.write(("," if n > 1 else "") + "\n    " + (text if encoded else item_text(json.loads(text))))
        fh.write("\n  ]" if n else "]")
    return Span(path, 0, path.stat().st_size)


def write_object(path: Path, items: Iterable[tuple[str, object]]) -> Span:
    """Write the JSON object of `items` (key, value) to the file `path` as `write` writes a top-level
    value, an item at a time, and return its span (the part files, an entry each)."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("{")
        n = 0
        for n, (key, value) in enumerate(items, 1):
            fh.write(("," if n > 1 else "") + "\n    " + json.dumps(key) + ": " + item_text(value))
        fh.write("\n  }" if n else "}")
    return Span(path, 0, path.stat().st_size)
