"""The reuse state (`_reuse.json`): what a run over an output needs to reuse its work, as frozen
typed records, read and written here only (docs/asr-tables.md, "Re-runs").

A `State` lists each batch of the output (`Batch`: its part name, its session groups with their
fingerprints, the manifest inputs and skipped paths it recorded, its rows per table and per group),
the heads of the transcripts discovery read, and when each group's source was last read. The file
also names the version that wrote it (`producer`), the meaning of what it holds (`STATE_LAYOUT`) and
a digest of every table's columns (`tables_digest`): a state of another version, layout or columns
is not this version's (`read` returns None), and the output is read as a source instead
(batch/sources/archive.py).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path

from batch.errors import OutputError
from batch.output.layout import STATE, STATE_LAYOUT
from batch.schema import TABLES
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import Opened, fingerprint_of
from batch.version import PRODUCER, VERSION

# A group's fingerprint as stored: per file [name, size, modification time ns, sidecar digest], per
# Git object [kind, ID...], per file rebuilt from an earlier output [name, size, SHA-256]; held as
# its JSON text (batch/sources/base.py `fingerprint_text`, `reuse.fingerprints`); None when only
# reading tells.
Fingerprint = str | None


class InputEntries:
    """A batch's manifest entries of the files it read, held as their JSON text, an entry a line: the
    run holds a few hundred bytes per file instead of a dict of objects (docs/performance.md, "A
    cluster run, on paper"). Iterating parses them, an entry at a time."""

    __slots__ = ("lines",)

    def __init__(self, entries: Iterable[dict] = ()) -> None:
        self.lines = "\n".join(_dumps(e) for e in entries)

    def __iter__(self) -> Iterator[dict]:
        return (json.loads(line) for line in self.texts())

    def __len__(self) -> int:
        return self.lines.count("\n") + 1 if self.lines else 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InputEntries) and other.lines == self.lines

    def __repr__(self) -> str:
        return f"InputEntries({len(self)} entries)"

    def texts(self) -> list[str]:
        """Each entry's JSON text (`json.dumps` with the state's separators)."""
        return self.lines.split("\n") if self.lines else []

    def json_text(self) -> str:
        """The entries as one JSON array, as `json.dumps(list(self))` writes it with the state's separators."""
        return "[" + self.lines.replace("\n", ",") + "]"


class Stored:
    """Where a batch's entry is in the state file it was read from (its characters `start` to `end`,
    the file up to them being ASCII, as `write` writes it): the run reads it again when it wants the batch's
    inputs or rows, rather than holding them for every batch of the previous output."""

    __slots__ = ("path", "start", "end", "part")

    def __init__(self, path: Path, start: int, end: int, part: str) -> None:
        self.path, self.start, self.end, self.part = path, start, end, part

    def value(self) -> dict:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.start)
                value = json.loads(fh.read(self.end - self.start))
        except (OSError, ValueError) as exc:
            value = exc
        if not isinstance(value, dict) or value.get("part") != self.part:
            raise OutputError(f"{self.path} changed while this run read it: run it again")
        return value


class StoredInputs(InputEntries):
    """A previous batch's manifest entries, read from the state file when iterated (`Stored`)."""

    __slots__ = ("stored", "count")

    def __init__(self, stored: Stored, count: int) -> None:
        self.stored, self.count = stored, count

    def __reduce__(self):  # (pickled as where it is: a task on another worker reads it there)
        return StoredInputs, (self.stored, self.count)

    @property
    def lines(self) -> str:
        return "\n".join(_dumps(e) for e in self)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.stored.value()["inputs"])

    def __len__(self) -> int:
        return self.count


class StoredRows(Mapping):
    """A previous batch's rows per table and group, read from the state file when used (`Stored`)."""

    __slots__ = ("stored", "groups")

    def __init__(self, stored: Stored, groups: int) -> None:
        self.stored, self.groups = stored, groups

    def _rows(self) -> dict[str, tuple[int, ...]]:
        return _rows(self.stored.value().get("rows"), self.groups) or {}

    def __getitem__(self, label: str) -> tuple[int, ...]:
        return self._rows()[label]

    def items(self):  # (each read from the file once, not once per label as Mapping's would)
        return self._rows().items()

    def keys(self):
        return self._rows().keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows())

    def __len__(self) -> int:
        return len(self._rows())


class StoredGroups(Mapping):
    """A previous batch's groups (owner -> fingerprint), the fingerprints left in the state file: each
    is where its text is in the file (`StoredFingerprint`), read when compared or parsed, so that a
    re-run holds no fingerprint text for the groups it reuses (docs/performance.md, "A cluster run, on
    paper"). In owner order; a fingerprint of None is held as such. Pickled as the places: a task on
    another worker reads the texts there."""

    __slots__ = ("path", "index", "spans")

    def __init__(self, path: Path, spans: dict[str, tuple[int, int] | None]) -> None:
        self.path, self.index, self.spans = path, {}, array("q")
        for n, (owner, span) in enumerate(sorted(spans.items())):
            self.index[owner] = n
            self.spans.extend(span or (-1, -1))

    def __getitem__(self, owner: str) -> StoredFingerprint | None:
        n = self.index[owner]
        return None if self.spans[2 * n] < 0 else StoredFingerprint(self, n)

    def __contains__(self, owner: object) -> bool:
        return owner in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)

    def keys(self):
        return self.index.keys()

    def text(self, n: int, opened: Opened | None = None) -> str:
        """The text of the `n`th group's fingerprint, as the file holds it (read from `opened`'s file when given)."""
        if opened is None:
            return self.texts([n])[0]
        fh = opened.get(self.path, lambda stack: stack.enter_context(open(self.path, "rb")))
        start, end = self.spans[2 * n], self.spans[2 * n + 1]
        fh.seek(start)
        return self._checked([fh.read(end - start)])[0]

    def texts(self, ns: list[int] | None = None) -> list[str | None]:
        """The fingerprints' texts of the groups `ns` (by place; all by default), read in one read."""
        ns = range(len(self.index)) if ns is None else ns
        held = [n for n in ns if self.spans[2 * n] >= 0]
        if not held:
            return [None] * len(ns)
        low, high = min(self.spans[2 * n] for n in held), max(self.spans[2 * n + 1] for n in held)
        try:
            with open(self.path, "rb") as fh:
                fh.seek(low)
                data = fh.read(high - low)
        except OSError as exc:
            raise OutputError(f"{self.path} changed while this run read it: run it again") from exc
        return self._checked([None if self.spans[2 * n] < 0 else data[self.spans[2 * n] - low : self.spans[2 * n + 1] - low]
                              for n in ns])

    def _checked(self, texts: list[bytes | None]) -> list[str | None]:
        """Fingerprints' texts as read (None for none), when they are still JSON arrays of ASCII."""
        if not all(t is None or (t.isascii() and t.startswith(b"[") and t.endswith(b"]")) for t in texts):
            raise OutputError(f"{self.path} changed while this run read it: run it again")
        return [None if t is None else t.decode() for t in texts]

    def fingerprint_texts(self) -> dict[str, str | None]:
        """Every group's fingerprint as text, by owner (one read of the file)."""
        return dict(zip(self.index, self.texts()))



class StoredFingerprint:
    """A fingerprint of a previous batch's group, its text in the state file (`StoredGroups`): told
    when asked (`fingerprint_of`), equal to another fingerprint of the same text."""

    __slots__ = ("groups", "n")

    def __init__(self, groups: StoredGroups, n: int) -> None:
        self.groups, self.n = groups, n

    def fingerprint_text(self, opened: Opened | None = None) -> str:
        return self.groups.text(self.n, opened)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredFingerprint):
            return (other.groups is self.groups and other.n == self.n) or other.fingerprint_text() == self.fingerprint_text()
        if isinstance(other, str):
            return other == self.fingerprint_text()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredFingerprint({self.fingerprint_text()})"


def group_texts(groups: Mapping[str, object]) -> Iterator[tuple[str, str | None]]:
    """Each group's fingerprint as text (`fingerprint_of`), by owner; those of a stored batch read at once."""
    if isinstance(groups, StoredGroups):
        return iter(groups.fingerprint_texts().items())
    return ((o, fingerprint_of(fp)) for o, fp in groups.items())


class StoredItems:
    """An object of the previous state held by the file, not in memory: the groups' `reads` (owner ->
    [last read at, found by its run]) or discovery's `heads` (file name -> [size, modification time,
    agent ID, session ID]). `items` reads it from the state file an entry at a time, in the file's
    order: its characters `start` to `end` (`Stored`), `count` entries, `ordered` when their keys are in
    order (as `write` writes them). Not a mapping: looking a key up would read the file (`pick`)."""

    __slots__ = ("path", "start", "end", "count", "ordered")

    def __init__(self, path: Path, start: int, end: int, count: int, ordered: bool) -> None:
        self.path, self.start, self.end, self.count, self.ordered = path, start, end, count, ordered

    def items(self) -> Iterator[tuple[str, object]]:
        ended: list[int] = []
        try:
            with open(self.path, "rb") as raw:
                raw.seek(self.start)
                with io.TextIOWrapper(raw, encoding="utf-8", newline="") as fh:
                    yield from _pairs(_Text(fh, self.start), self.start, ended)
        except (OSError, ValueError) as exc:
            raise OutputError(f"{self.path} changed while this run read it: run it again") from exc
        if ended != [self.end]:
            raise OutputError(f"{self.path} changed while this run read it: run it again")

    def __len__(self) -> int:
        return self.count


def pick(items: Mapping[str, object] | StoredItems, keys: set[str]) -> dict[str, object]:
    """The entries of `items` whose keys are among `keys` (a stored object read through once)."""
    if isinstance(items, StoredItems):
        return {k: v for k, v in items.items() if k in keys} if keys else {}
    return {k: items[k] for k in keys if k in items}


@dataclass(frozen=True)
class Batch:
    """A batch of the output: its parts (`part-<part>.parquet` of the tables in `counts` and of the
    work tables in `work`), the groups they hold, and what its conversion recorded."""

    part: str
    groups: Mapping[str, Fingerprint]  # owner -> fingerprint (given as entries, held as text), sorted by owner
    inputs: InputEntries  # the manifest's entries of the files it read (given as dicts, held as text)
    skipped: tuple[tuple[str, str], ...]  # (path, why)
    counts: Mapping[str, int]  # output table -> rows of its part
    work: tuple[str, ...] = ()  # the work tables it has parts of
    rows: Mapping[str, tuple[int, ...]] | None = None  # table (work: `_work/<name>`) -> rows per group, sorted
    # the earlier version whose rows the batch holds as it wrote them (batch/incremental/as_written.py):
    # parts of final tables too, which the final stage does not read; None for a batch this version converted
    written_by: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.inputs, InputEntries):
            object.__setattr__(self, "inputs", InputEntries(self.inputs))
        if not isinstance(self.groups, StoredGroups) and any(
            fp is not None and not isinstance(fp, str) for fp in self.groups.values()
        ):
            object.__setattr__(self, "groups", {
                o: fingerprint_of(fp) for o, fp in self.groups.items()
            })

    def with_inputs(self, inputs: list[dict]) -> Batch:
        return replace(self, inputs=InputEntries(inputs))

    def to_json(self, *, inputs: bool = True, groups: bool = True) -> dict:
        """The batch as the state file holds it (`inputs`, `groups`: with their entries parsed, else empty)."""
        return {
            "part": self.part,
            "groups": {o: None if fp is None else json.loads(fp) for o, fp in group_texts(self.groups)} if groups else {},
            "inputs": list(self.inputs) if inputs else [],
            "skipped": [list(s) for s in self.skipped],
            "counts": dict(self.counts),
            "work": list(self.work),
            **({"rows": {k: list(v) for k, v in self.rows.items()}} if self.rows is not None else {}),
            **({"written_by": self.written_by} if self.written_by else {}),
        }

    @staticmethod
    def from_json(value: object, stored: Stored | None = None, read: Callable[[int], str] | None = None) -> Batch:
        """A batch entry as a state file holds it; ValueError when it is not one. `stored`: where it is
        in that file, its inputs and rows then read from there when wanted, and its groups' fingerprints
        too when its text begins as `write` writes it (`read(n)`: its first `n` characters; `StoredGroups`)."""
        if not isinstance(value, dict):
            raise ValueError("a batch is not an object")
        part, groups, inputs = value.get("part"), value.get("groups"), value.get("inputs")
        skipped, counts, work, rows = value.get("skipped"), value.get("counts"), value.get("work", []), value.get("rows")
        written_by = value.get("written_by")
        if not (
            isinstance(part, str) and isinstance(groups, dict) and all(isinstance(o, str) for o in groups)
            and all(fp is None or isinstance(fp, list) for fp in groups.values())
            and isinstance(inputs, list) and all(isinstance(i, dict) and isinstance(i.get("path"), str) for i in inputs)
            and isinstance(skipped, list) and all(isinstance(s, list) and len(s) == 2 for s in skipped)
            and isinstance(counts, dict) and all(type(n) is int for n in counts.values())
            and isinstance(work, list) and all(isinstance(w, str) for w in work)
            and (written_by is None or isinstance(written_by, str))
        ):
            raise ValueError(f"batch {part!r} is not as this version writes it")
        rows = _rows(rows, len(groups))
        # (as the state holds it: the entries of a fingerprint in the order `fingerprint_text` gave them)
        groups = {o: None if fp is None else _dumps(fp) for o, fp in groups.items()}
        if stored is not None:
            inputs, rows = StoredInputs(stored, len(inputs)), None if rows is None else StoredRows(stored, len(groups))
            spans = None if read is None else _group_spans(part, groups, read, stored.start)
            if spans is not None:
                groups = StoredGroups(stored.path, spans)
        return Batch(
            part, groups if isinstance(groups, StoredGroups) else dict(sorted(groups.items())), inputs if stored else tuple(inputs),
            tuple((str(a), str(b)) for a, b in skipped), dict(counts), tuple(work), rows, written_by,
        )


@dataclass(frozen=True)
class State:
    """The reuse state of an output."""

    run_key: str | None = None  # what every batch depends on beyond its files (`reuse.run_key`)
    imports: str | None = None  # what the rows sources give once per run depend on (`registry.run_key`)
    # discovery's heads of transcripts, by name (read from the file by `items`: `StoredItems`)
    heads: Mapping[str, list] | StoredItems = field(default_factory=dict)
    event_heads: Mapping[str, list] = field(default_factory=dict)  # the same of Entire event files
    batches: tuple[Batch, ...] = ()
    # owner -> [last read at, found by its run] (read from the file by `items`: `StoredItems`)
    reads: Mapping[str, list] | StoredItems = field(default_factory=dict)
    tables: str | None = None  # `tables_digest` of the version that wrote it

    def owners(self) -> dict[str, Fingerprint]:
        """Every group of the output with its fingerprint."""
        return {o: fp for b in self.batches for o, fp in b.groups.items()}

    def recorded(self, owners: set[str] | frozenset[str]) -> dict[str, str | None]:
        """The SHA-256 recorded of each file of the groups `owners`, by path (a group's inputs are
        recorded by a batch holding it: only those batches' entries are read)."""
        return {i["path"]: i.get("sha256") for b in self.batches if b.groups.keys() & owners for i in b.inputs}

    def reads_by_owner(self) -> Iterable[tuple[str, object]]:
        """The groups' reads (`reads`), in owner order: as the file lists them when it is in order."""
        if isinstance(self.reads, StoredItems) and self.reads.ordered:
            return self.reads.items()
        return sorted(self.reads.items(), key=lambda item: item[0])

    def with_batches(self, batches: list[Batch] | tuple[Batch, ...]) -> State:
        return replace(self, batches=tuple(batches))

    def to_json(self, *, batches: bool = True, stored: bool = True) -> dict:
        """The state as its file holds it (`batches`: with each batch's entry, else an empty list;
        `stored`: with the heads and the groups' reads, else empty mappings)."""
        return {
            "producer": {"name": PRODUCER, "version": VERSION}, "layout": STATE_LAYOUT, "tables": tables_digest(),
            "run_key": self.run_key, "imports": self.imports, "heads": dict(self.heads.items()) if stored else {},
            "event_heads": dict(self.event_heads), "batches": [b.to_json() for b in self.batches] if batches else [],
            "reads": dict(self.reads.items()) if stored else {},
        }


def read(out: Path) -> State | None:
    """The reuse state of the output folder `out` when this version and layout wrote it, whatever
    columns its tables have (`State.tables`: compare with `tables_digest`); None otherwise, or when
    the file is missing, not JSON or not as this version writes it. Only reads.

    The file is read a slice at a time and parsed an entry at a time (`_members`), and each batch
    holds where its entry is in the file (`Stored`) rather than its inputs and rows
    (docs/performance.md, "A cluster run, on paper")."""
    try:
        path = out.resolve() / STATE
        if path.is_symlink() or not path.is_file():
            return None

        def batch(entry: object, start: int, end: int) -> Batch:
            # (while every character read is ASCII, as `write` writes the file, offsets in characters are in bytes)
            where = Stored(path, start, end, entry.get("part")) if source.ascii and isinstance(entry, dict) else None
            return Batch.from_json(entry, where, lambda n: source.slice(start, min(start + n, end)))

        with open(path, encoding="utf-8", newline="") as fh:
            source = _Text(fh)
            # (the heads and the reads, an entry per file and per group, are read again from the file when
            # wanted: `StoredItems`)
            value = _members(source, {"batches": batch}, {"event_heads": None}, set(_STORED))
        spans = [key for key in _STORED if isinstance(value.get(key), tuple)]
        if source.ascii:  # (where each object is, its entries, whether in key order)
            value.update((key, StoredItems(path, *value[key])) for key in spans)
        elif spans:  # (a file edited by hand: offsets in characters are not in bytes; held)
            with open(path, encoding="utf-8", newline="") as fh:
                whole = _members(_Text(fh), {"batches": lambda *_: None}, dict.fromkeys(["event_heads", *_STORED]))
            value.update((key, whole.get(key)) for key in spans)
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symbolic link loop; ValueError: not JSON, or
        return None  # a batch not as this version writes it
    if value.get("producer") != {"name": PRODUCER, "version": VERSION} or value.get("layout") != STATE_LAYOUT:
        return None

    def mapping(key: str) -> dict | StoredItems:
        found = value.get(key)
        return found if isinstance(found, (dict, StoredItems)) else {}

    def text(key: str) -> str | None:
        found = value.get(key)
        return found if isinstance(found, str) else None

    return State(
        text("run_key"), text("imports"), mapping("heads"), mapping("event_heads"), tuple(value.get("batches", ())),
        mapping("reads"), text("tables"),
    )


_STORED = ("heads", "reads")  # the state's objects read from its file when wanted (`StoredItems`)


_READ = 1 << 18  # characters of the state file read at once (`_Text`)
_SPACE = re.compile(r"[ \t\n\r]*")


class _Text:
    """The text of a file, read a slice at a time as it is parsed: what lies before `release`'s offset
    is let go of. Offsets are from the start of the file, in characters."""

    def __init__(self, fh, base: int = 0) -> None:  # (`base`: the file's offset `fh` is at)
        self.fh, self.text, self.base, self.ended = fh, "", base, False
        self.ascii = True  # every character read so far is ASCII
        self.raw_decode = json.JSONDecoder().raw_decode

    def _more(self) -> bool:
        """Read more of the file (at least as much as is held: a long value is read in doubling slices)."""
        if not self.ended:
            chunk = self.fh.read(max(_READ, len(self.text)))
            self.text += chunk
            self.ended = not chunk
            self.ascii = self.ascii and chunk.isascii()
        return not self.ended

    def char(self, i: int) -> str:
        """The character at `i`; empty at the end of the file."""
        while i - self.base >= len(self.text):
            if not self._more():
                return ""
        return self.text[i - self.base]

    def space(self, i: int) -> int:
        """Where the white space from `i` on ends."""
        if i - self.base < len(self.text) and self.text[i - self.base] not in " \t\n\r":
            return i  # (as `write` writes the file: no space between its values)
        while True:
            end = _SPACE.match(self.text, i - self.base).end()
            if end < len(self.text) or not self._more():
                return end + self.base

    def decode(self, i: int) -> tuple[object, int]:
        """The JSON value at `i`, and where it ends (a value that reaches the end of what is read, a
        number perhaps cut, is read again with more)."""
        while True:
            try:
                value, end = self.raw_decode(self.text, i - self.base)
            except ValueError:
                if self._more():
                    continue
                raise
            if end < len(self.text) or not self._more():
                return value, end + self.base

    def slice(self, start: int, end: int) -> str:
        """The text from `start` to `end`, read and not let go of yet."""
        return self.text[start - self.base : end - self.base]

    def release(self, i: int) -> None:
        """Let go of the text before `i` (once it is a slice's worth)."""
        if i - self.base >= _READ:
            self.text, self.base = self.text[i - self.base :], i


def _members(
    text: _Text, arrays: dict[str, Callable[[object, int, int], object]],
    objects: dict[str, Callable[[str, object], tuple[str, object]] | None], spans: set[str] = frozenset(),
) -> dict:
    """The members of the JSON object `text`: an array named in `arrays` as the list of what its
    function gives of each entry (the entry parsed, where it starts and ends in the text), an object
    named in `objects` as a dict of what its function gives of each member (key, value; the member
    itself when None), an object named in `spans` as where it starts and ends, its count of members
    and whether their keys are in order (each parsed, none held), each an entry at a time (`json.loads`
    of the whole text would hold every batch's entry at once, about 2.7 KiB per input file).
    ValueError when `text` is not a JSON object, or such an array member not an array."""
    found = {}

    def items(i: int, close: str, item: Callable[[int], int]) -> int:
        """Each item of an object or array from `i` on, to its `close`; where it ends."""
        i = text.space(i)
        if text.char(i) == close:
            return i + 1
        while True:
            i = text.space(item(i))
            text.release(i)
            if _expect(text, i, "," + close) == close:
                return i + 1
            i = text.space(i + 1)

    def entries(key: str, into: list) -> Callable[[int], int]:
        def entry(i: int) -> int:
            value, end = text.decode(i)
            into.append(arrays[key](value, i, end))
            return end
        return entry

    def member(i: int) -> int:
        key, i = _pair(text, i)
        if key in arrays:
            _expect(text, i, "[")
            found[key] = []
            return items(i + 1, "]", entries(key, found[key]))
        if key in spans and text.char(i) == "{":
            ended, count, ordered, last = [], 0, True, None
            for name, _ in _pairs(text, i, ended):
                count, ordered, last = count + 1, ordered and (last is None or last < name), name
            found[key] = (i, ended[0], count, ordered)
            return ended[0]
        if key in objects and text.char(i) == "{":
            ended, into = [], {}
            for name, value in _pairs(text, i, ended):
                name, value = (name, value) if objects[key] is None else objects[key](name, value)
                into[name] = value
            found[key] = into
            return ended[0]
        found[key], i = text.decode(i)
        return i

    i = text.space(0)
    _expect(text, i, "{")
    if text.char(text.space(items(i + 1, "}", member))):
        raise ValueError("extra data after the state file's object")
    return found


def _expect(text: _Text, i: int, chars: str) -> str:
    """The character at `i`, which must be one of `chars` (else ValueError)."""
    char = text.char(i)
    if not char or char not in chars:
        raise ValueError(f"not a JSON object as the state file holds it (at character {i})")
    return char


def _pair(text: _Text, i: int) -> tuple[str, int]:
    """The key of an object's member at `i`, and where its value starts."""
    key, i = text.decode(i)
    if not isinstance(key, str):
        raise ValueError("a key is not a string")
    i = text.space(i)
    _expect(text, i, ":")
    return key, text.space(i + 1)


def _pairs(text: _Text, i: int, ended: list[int]) -> Iterator[tuple[str, object]]:
    """Each member (key, value) of the JSON object whose `{` is at `i`, parsed an entry at a time;
    where the object ends is appended to `ended` once it is read through."""
    _expect(text, i, "{")
    i = text.space(i + 1)
    if text.char(i) != "}":
        while True:
            key, i = _pair(text, i)
            value, i = text.decode(i)
            yield key, value
            i = text.space(i)
            text.release(i)
            if _expect(text, i, ",}") == "}":
                break
            i = text.space(i + 1)
    ended.append(i + 1)


def write(
    folder: Path, state: State, batches: Iterable[str] | None = None, heads: Iterable[tuple[str, list]] | None = None,
    reads: Iterable[tuple[str, list]] | None = None,
) -> None:
    """Write `state` as the reuse state of the output folder `folder`: `json.dumps(state.to_json())`'s
    text, encoded a batch or a slice of a mapping at a time (whole, its pieces would take several
    times the file's size of memory, which the process keeps: docs/performance.md, "A cluster run, on
    paper"). `batches`: the batches' entries as their text (`BatchLog.texts`), in place of
    `state.batches`; `heads`: the heads' entries (`FileTable.heads`), in place of `state.heads`; `reads`: the groups' reads
    (`history.reads`), in place of `state.reads`."""
    texts = (_batch_text(b) for b in state.batches) if batches is None else batches
    with open(folder / STATE, "w", encoding="utf-8") as fh:
        fh.write("{")
        for i, (key, value) in enumerate(state.to_json(batches=False, stored=False).items()):
            fh.write(("," if i else "") + _dumps(key) + ":")
            if key == "batches":
                fh.write("[")
                for n, text in enumerate(texts):
                    fh.write(("," if n else "") + text)
                fh.write("]")
            elif key == "heads":
                _write_items(fh, state.heads.items() if heads is None else heads)
            elif key == "reads":
                _write_items(fh, state.reads.items() if reads is None else reads)
            elif isinstance(value, dict):
                _write_items(fh, value.items())
            else:
                fh.write(_dumps(value))
        fh.write("}\n")


def _write_items(fh, items: Iterable[tuple[str, object]]) -> None:
    """Write a JSON object of `items` (distinct keys), a slice of them encoded at a time."""
    items, first = iter(items), True
    fh.write("{")
    while chunk := list(islice(items, _SLICE)):
        fh.write(("" if first else ",") + _dumps(dict(chunk))[1:-1])
        first = False
    fh.write("}")


_SLICE = 4096  # entries of a mapping encoded at once (`write`)


def _group_spans(
    part: str, groups: dict[str, str | None], read: Callable[[int], str], start: int,
) -> dict[str, tuple[int, int] | None] | None:
    """Where each group's fingerprint text is in the state file, its batch's entry starting at `start`
    (None for a fingerprint of None); None when the entry does not begin as `write` writes it (`read(n)`:
    its first `n` characters)."""
    pieces, spans = ['{"part":' + _dumps(part) + ',"groups":{'], {}
    at = len(pieces[0])
    for n, (owner, fp) in enumerate(groups.items()):
        key, value = ("," if n else "") + _dumps(owner) + ":", "null" if fp is None else fp
        spans[owner] = None if fp is None else (start + at + len(key), start + at + len(key) + len(fp))
        pieces += [key, value]
        at += len(key) + len(value)
    expected = "".join(pieces) + "}"
    return spans if read(len(expected)) == expected else None


def _batch_text(b: Batch) -> str:
    """A batch's entry as the state file holds it: `json.dumps(b.to_json())` with the state's separators."""
    entry = b.to_json(inputs=False, groups=False)
    groups = "{" + ",".join(_dumps(o) + ":" + ("null" if fp is None else fp) for o, fp in group_texts(b.groups)) + "}"
    return "{" + ",".join(
        _dumps(k) + ":" + (b.inputs.json_text() if k == "inputs" else groups if k == "groups" else _dumps(v))
        for k, v in entry.items()
    ) + "}"


class BatchLog:
    """The batches of the output a run writes, in the order taken: each batch's state entry spooled
    to the file `path` of the run folder as its JSON text, a line each, so that the run holds per batch
    its part name and where its line is, not its groups, inputs and rows (docs/performance.md, "A
    cluster run, on paper"). Iterating reads them back a batch at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        self.lines: list[tuple[str, int, int, bool]] = []  # (part, offset, length, written by an earlier version)

    def add(self, batch: Batch) -> None:
        data = (_batch_text(batch) + "\n").encode()
        with open(self.path, "ab") as fh:
            offset = fh.tell()
            fh.write(data)
        self.lines.append((batch.part, offset, len(data) - 1, batch.written_by is not None))

    def __len__(self) -> int:
        return len(self.lines)

    def __iter__(self) -> Iterator[Batch]:
        return (Batch.from_json(json.loads(text)) for text in self.texts())

    def texts(self) -> Iterator[str]:
        """Each batch's entry as its JSON text, in the order of `lines`."""
        with open(self.path, "rb") as fh:
            for _, offset, length, _ in self.lines:
                fh.seek(offset)
                yield fh.read(length).decode()

    def sort(self) -> None:
        """Order the batches by part name (a stable sort), as the state file lists them."""
        self.lines.sort(key=lambda line: line[0])

    def parts_as_written(self) -> frozenset[str]:
        """The parts of the batches that hold rows as an earlier version wrote them."""
        return frozenset(part for part, _, _, earlier in self.lines if earlier)


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


@functools.cache
def tables_digest(without: frozenset[str] = frozenset()) -> str:
    """A digest of every table's columns and types, the work tables' included but those `without`: a
    state written with other columns is another version's (its parts would be reused beside parts of
    other columns), unless only work tables it can derive are missing (batch/incremental/upgrade.py)."""
    schemas = [(t.name, t.schema) for t in TABLES] + [
        (f"_work/{n}", s) for n, s in sorted(WORK_SCHEMAS.items()) if n not in without
    ]
    text = "\n".join(f"{name}: " + ", ".join(f"{f.name} {f.type}" for f in schema) for name, schema in schemas)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _rows(value: object, groups: int) -> dict[str, tuple[int, ...]] | None:
    """A batch's rows per table and group, when well formed (else None: told from its parts when needed)."""
    if not isinstance(value, dict):
        return None
    rows = {}
    for label, counts in value.items():
        if not (isinstance(counts, list) and len(counts) == groups and all(type(n) is int and n >= 0 for n in counts)):
            return None
        rows[str(label)] = tuple(counts)
    return rows
