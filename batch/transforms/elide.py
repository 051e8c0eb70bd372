"""Long strings out of the way of the decode: a line's memory stays a small multiple of its size.

DuckDB's JSON decode takes many times the size of the text it parses (a document of the whole
line, then each JSON field it returns written again as text, then parsed again by the statements
that read it: up to about 40 times a long line's size, docs/decisions/001-long-lines.md). The long
values of a long line are almost always one or a few strings (a file read back, a log, an image in
base64), and no statement reads more of them than their start and a closing tag at their end. So
before the decode, each JSON string of at least ELIDE_CHARS characters (as written) in a text of at
least that many bytes is replaced by its first PREFIX_CHARS and last SUFFIX_CHARS characters with a
sentinel naming it between them; the conversion runs on the reduced text, and `Elided.restore` puts
the rest of each string back into every output value that holds its sentinel, in the form that
value holds it in:

- `verbatim`: the text as the line wrote it (records.native): the rest as the line wrote it;
- `decoded`: a string value read out of the JSON (parts.text): the rest decoded;
- `json`: JSON written again by DuckDB (tool_calls.input): the rest escaped as DuckDB escapes.

The sentinel tells the three apart by how its quote is written: `\\uE000asr:KEY\\"\\uE001` as the
reduced line holds it (ASCII escapes), `<U+E000>asr:KEY"<U+E001>` decoded, `<U+E000>asr:KEY\\"<U+E001>`
as DuckDB writes it again (non-ASCII characters as they are, the quote escaped). KEY is a hash of
the string as written, so equal strings have equal sentinels and the decision to elide depends on
the string alone: a reduced text's hash tells texts apart as the text's would.

A string is kept as it is where eliding it could change what is read (`_certain`: an escape JSON
does not have, a lone half of a surrogate pair; a text with a control character). A value that
still holds a sentinel after the restore (a form not foreseen) raises Unrestored, a MemoryError:
the pipeline converts the batch again as after running out of memory, and its last attempt decodes
the lines whole, without elision.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator

import polars as pl

# strings of at least this many characters are elided (so only texts of at least this many bytes
# are looked at): docs/decisions/001-long-lines.md
ELIDE_CHARS = 1 << 20
# the characters of an elided string (as written) kept before and after its sentinel: more than
# any statement reads of a text's start (text_head: 256) or looks for at its end (a closing tag)
PREFIX_CHARS = 4096
SUFFIX_CHARS = 1024

_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
# a string's body as written, up to its closing quote
_BODY = re.compile(r'(?:[^"\\]++|\\.)*+', re.S)
# a string's body whose decode is certain: characters, JSON's escapes, surrogate pairs whole
_CERTAIN = re.compile(
    r'(?:[^"\\]++|\\["\\/bfnrt]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4}'
    r'|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})*+'
)
_SENTINEL = re.compile(
    r'\\uE000asr:(?P<v>[0-9a-f]{32})\\"\\uE001'  # verbatim
    r'|\ue000asr:(?P<j>[0-9a-f]{32})\\"\ue001'  # JSON written by DuckDB
    r'|\ue000asr:(?P<d>[0-9a-f]{32})"\ue001'  # decoded
)
_LEFT = ("\ue000asr:", "\\uE000asr:")  # what any form of a sentinel starts with
# DuckDB writes a string in JSON as Python's json.dumps does (ensure_ascii off: the quote, the
# backslash and the control characters escaped, short forms where JSON has one), but for the hex
# digits of \u00XX, in upper case
_LOWER_HEX = re.compile(r"\\u00[0-9a-f]{2}")
_ESCAPE = re.compile(r"\\(?:u00[0-9a-fA-F]{2}|.)", re.S)


def _upper(match: re.Match) -> str:
    escape = match.group()
    return "\\u" + escape[2:].upper() if escape.startswith("\\u") else escape


class Unrestored(MemoryError):
    """An output value holds a sentinel in a form `Elided.restore` does not know."""


class Elided:
    """The elided strings of one batch: each key's rest as written (its decoded and JSON forms are
    made when an output value needs them)."""

    def __init__(self) -> None:
        self.min_chars, self.prefix_chars, self.suffix_chars = ELIDE_CHARS, PREFIX_CHARS, SUFFIX_CHARS
        self.rests: dict[str, str] = {}

    def reduce(self, texts: pl.Series) -> pl.Series:
        """`texts` with the long strings of each long text elided (the same Series when none is)."""
        rows = (texts.str.len_bytes() >= self.min_chars).arg_true()
        if rows.is_empty():  # the common case: no text is read beyond its length
            return texts
        # a control character is invalid in a JSON string (and rare as whitespace between values):
        # a text holding one is decoded whole, as is
        rows = rows.filter(~texts.gather(rows).str.contains(r"[\x00-\x1f]"))
        if rows.is_empty():
            return texts
        reduced = [self._reduce(text) for text in texts.gather(rows).to_list()]
        return texts.clone().scatter(rows, reduced)  # scatter writes in place: `texts` is the caller's

    def _reduce(self, text: str) -> str:
        pieces, at = [], 0
        for start, end in _long_strings(text, self.min_chars + 2):
            if (elided := self._elide(text, start, end)) is not None:
                pieces += [text[at:start], elided]
                at = end
        return "".join(pieces) + text[at:] if pieces else text

    def _elide(self, text: str, start: int, end: int) -> str | None:
        """The reduced form of the string token text[start:end] (read in place: a long token is
        not copied but for its rest), None where it is kept whole."""
        if not _certain(text, start + 1, end - 1):
            return None
        head = _boundary(text, start, end, start + 1 + self.prefix_chars, 1)
        tail = _boundary(text, start, end, end - 1 - self.suffix_chars, -1)
        if head is None or tail is None or tail <= head:
            return None
        digest = hashlib.blake2b(digest_size=16)
        for at in range(start, end, 1 << 20):
            digest.update(text[at:min(end, at + (1 << 20))].encode("utf-8"))
        key = digest.hexdigest()
        if key not in self.rests:
            self.rests[key] = text[head:tail]
        return f'{text[start:head]}\\uE000asr:{key}\\"\\uE001{text[tail:end]}'

    def restore(self, value: pl.DataFrame | Iterable[pl.DataFrame]) -> pl.DataFrame | Iterator[pl.DataFrame]:
        """`value` (a frame, or frames one at a time) with every sentinel replaced by its string's
        rest: `value` itself when nothing was elided, else frames restored one at a time as they are
        taken (the writer takes one table at a time: one table's restored values are held at once)."""
        if not self.rests:
            return value
        return (self._restore_frame(frame) for frame in ([value] if isinstance(value, pl.DataFrame) else value))

    def _restore_frame(self, frame: pl.DataFrame) -> pl.DataFrame:
        columns = []
        for name, dtype in frame.schema.items():
            if dtype == pl.String:
                column = frame.get_column(name)
                hit = column.str.contains(_LEFT[0], literal=True) | column.str.contains(_LEFT[1], literal=True)
                if hit.any():
                    rows = hit.fill_null(False).arg_true()
                    columns.append(column.clone().scatter(rows, [self._restore(v) for v in column.gather(rows).to_list()]))
            elif _holds_strings(dtype) and frame.select(_nested_hit(name, dtype)).item():
                raise Unrestored(f"elided text in the nested column {name} ({dtype})")
        return frame.with_columns(columns) if columns else frame

    def _restore(self, value: str) -> str:
        restored = _SENTINEL.sub(self._rest, value)
        if any(left in restored for left in _LEFT):
            raise Unrestored("an output value holds an elided string in a form that cannot be restored")
        return restored

    def _rest(self, match: re.Match) -> str:
        form = match.lastgroup
        key = match.group(form)
        raw = self.rests.get(key)
        if raw is None:
            raise Unrestored(f"an output value names an elided string this batch did not elide ({key})")
        if form == "v":
            return raw
        decoded = json.loads(f'"{raw}"')  # made for each value (not kept: one copy of the rest at a time)
        if form == "d":
            return decoded
        # as DuckDB writes it: Python's escapes but for the hex digits of \u00XX, in upper case there
        written = json.dumps(decoded, ensure_ascii=False)[1:-1]
        return _ESCAPE.sub(_upper, written) if _LOWER_HEX.search(written) else written


def _long_strings(text: str, min_length: int) -> Iterator[tuple[int, int]]:
    """The spans of the string tokens of the JSON text `text` at least `min_length` characters long
    (quotes included): from a quote, its body up to the next quote not escaped (one match of
    `_BODY`, which runs in C however many escapes the string holds)."""
    start = text.find('"')
    while start >= 0:
        end = _BODY.match(text, start + 1).end()
        if end >= len(text):
            return
        if end + 1 - start >= min_length:
            yield start, end + 1
        start = text.find('"', end + 1)


def _certain(text: str, start: int, end: int) -> bool:
    """Whether the string text[start:end] (as written, without its quotes) decodes as every JSON
    reader decodes it: no escape JSON does not have, no lone half of a surrogate pair (no UTF-8);
    the text holds no control character (Elided.reduce). Strings that are not certain are kept whole."""
    return _CERTAIN.fullmatch(text, start, end) is not None


def _boundary(text: str, start: int, end: int, at: int, step: int) -> int | None:
    """The first position from `at` on (`step` 1) or back (-1), within 64 characters, between two
    characters of the string token text[start:end] as written (`_between`); None if there is none."""
    for q in range(at, at + 64 * step, step):
        if not start + 1 < q < end - 1:
            return None
        if _between(text, start + 1, q):
            return q
    return None


def _between(text: str, first: int, q: int) -> bool:
    """Whether position q of a JSON string as written (its characters from `first`) falls between
    two of its characters: not inside an escape, nor between the two escapes of a surrogate pair.
    A run of backslashes after any other character starts at a character, and pairs off from there
    (`\\\\` is one character); so the parity of the run before a position tells whether the
    backslash before it starts an escape. Runs longer than 64 are not followed (False)."""

    def run(end: int) -> int | None:  # the backslashes just before `end`
        n = 0
        while end - n > first and text[end - n - 1] == "\\":
            n += 1
            if n > 64:
                return None
        return n

    before = run(q)
    if before is None:
        return False
    if before:
        return before % 2 == 0  # after `\\` pairs only; else inside the escape the last one starts
    # a character not a backslash: the end of `\X`, inside or at the end of `\uXXXX`, or itself
    for j in range(1, 6):  # text[q - j]: the `u` of an escape holding text[q - 1]?
        if q - j - 1 < first:
            break
        if text[q - j] == "u":
            backslashes = run(q - j)
            if backslashes is None:
                return False
            if backslashes % 2:  # `\u` starts an escape: q is inside it, or at its end
                return j == 5 and not _HIGH_SURROGATE.fullmatch(text, q - 6, q)
    return True


def _holds_strings(dtype: pl.DataType) -> bool:
    if isinstance(dtype, (pl.List, pl.Array)):
        return _holds_strings(dtype.inner)
    if isinstance(dtype, pl.Struct):
        return any(_holds_strings(field.dtype) for field in dtype.fields)
    return dtype == pl.String


def _nested_hit(name: str, dtype: pl.DataType) -> pl.Expr:
    """Whether any string inside the nested column holds the start of a sentinel."""
    def hits(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
        if isinstance(dtype, pl.Array):
            return hits(expr.arr.to_list(), pl.List(dtype.inner))
        if isinstance(dtype, pl.List):
            return expr.list.eval(hits(pl.element(), dtype.inner)).list.any()
        if isinstance(dtype, pl.Struct):
            return pl.any_horizontal(
                *(hits(expr.struct.field(f.name), f.dtype) for f in dtype.fields if _holds_strings(f.dtype))
            )
        return expr.str.contains(_LEFT[0], literal=True) | expr.str.contains(_LEFT[1], literal=True)

    return hits(pl.col(name), dtype).fill_null(False).any()
