"""Grown groups re-run as deltas: only the rows their new lines add are written.

A Claude Code session group whose every file only grew since the previous run (`growing_groups`)
is converted twice, as it was (its files read up to their previous sizes) and as it is, into
captures (`Captured`) instead of parts; per table, the new rows that are not among the old ones are
written (`run_deltas`, `difference`), and a table where rows changed falls back to the group's rows
whole. docs/asr-tables.md, "Re-runs".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from batch import reuse, sql
from batch.incremental.carving import Piece, RowsByGroup, group_of, part_label
from batch.incremental.state import Batch, State, pick
from batch.schema import TABLES_BY_NAME
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import CLAUDE_CODE, Unit, batches, fingerprint_entries, fingerprint_texts
from batch.sources.claude_code import Discovery, ToolResults, head_unchanged, load_files
from batch.output.folder import WORK
from batch.output.parts import BatchFiles, conform
from batch.run import task

if TYPE_CHECKING:
    from batch.run.executors import Shared
    from batch.run.memory import Stop


@dataclass
class Growth:
    """A group whose files only grew, re-run as a delta: its units now and as they were."""

    new: Unit
    old: Unit  # the same files, read up to their previous sizes (files added since left out)
    files: dict[str, str | None]  # the previous files' names, with the SHA-256 recorded for each
    fp: str  # its current fingerprint, as the state stores it


class Captured:
    """Stands in for the Output of a batch: keeps the frames it would write (`run_deltas`)."""

    def __init__(self, spill: Path) -> None:
        self.spill = spill
        self.frames: dict[tuple[str, bool], pl.DataFrame] = {}

    def open(self, table, index=0) -> CapturedPart:
        return CapturedPart(self, table)

    def write_work(self, name: str, data: pl.DataFrame, index=0) -> None:
        self.frames[(name, True)] = data


class CapturedPart:
    """A part of `Captured`: its pieces, in the declared schema, kept as one frame once closed."""

    def __init__(self, captured: Captured, table) -> None:
        self.captured, self.table, self.pieces, self.rows = captured, table, [], 0

    def append(self, data: pl.DataFrame | pa.Table) -> int:
        self.pieces.append(conform(self.table, data.to_arrow() if isinstance(data, pl.DataFrame) else data))
        self.rows += self.pieces[-1].num_rows
        return self.pieces[-1].num_rows

    def close(self) -> None:
        if self.pieces:
            self.captured.frames[(self.table.name, False)] = pl.from_arrow(pa.concat_tables(self.pieces))
            self.pieces = []


def growing_groups(
    plan: reuse.Plan, state: State | None, found: Discovery, units: list[Unit], current: dict[str, str | None],
    batch_bytes: int,
) -> dict[str, Growth]:
    """The changed groups to re-run as deltas: Claude Code session groups whose every file only grew
    (`reuse.grown`) and was classified as before, held by a previous batch that also holds an
    unchanged group (a group alone in its batches costs less to convert again), and not larger than
    a batch (its conversion as it was would be held in memory while it is converted as it is)."""
    if not state or not plan.changed:
        return {}
    batches_before = state.batches
    before = state.owners()
    by_owner: dict[str, list[Unit]] = {}
    for unit in units:
        by_owner.setdefault(unit.owner, []).append(unit)
    shared = {
        o for b in batches_before
        if any(reuse.unchanged(u, fp, current, plan.kept) for u, fp in b.groups.items())
        for o in b.groups
    }
    single = [
        owner for owner in sorted(plan.changed & shared)
        if len(by_owner.get(owner, [])) == 1 and by_owner[owner][0].size <= batch_bytes
    ]
    # (their fingerprints as text, each told once from its unit's rows)
    texts = dict(zip(single, fingerprint_texts(current.get(owner) for owner in single)))
    candidates = [owner for owner in single if reuse.grown(before.get(owner), texts[owner])]
    recorded = state.recorded(set(candidates))
    # what discovery read of their files' heads, by name (Claude Code transcripts only)
    found_heads = dict(found.files.heads(
        {e[0] for o in candidates for e in fingerprint_entries(texts[o])}, producer=CLAUDE_CODE
    ))
    # the previous run's heads of their files as fingerprinted then (read through the state file once)
    heads = pick(state.heads, {e[0] for o in candidates for e in fingerprint_entries(before[o])})
    growing = {}
    for owner in candidates:
        now = {name: (size, mtime) for name, size, mtime, _ in fingerprint_entries(texts[owner])}
        if not all(name in found_heads for name in now):
            continue
        old = {name: (size, mtime) for name, size, mtime, _ in fingerprint_entries(before[owner])}
        # a file as fingerprinted before is unchanged, its head too
        if not all(now.get(name) == old[name] or same_head(heads.get(name), found_heads.get(name), old[name])
                   for name in old):
            continue
        unit = by_owner[owner][0]  # a unit of transcript files: loading it lists them, it reads nothing
        files = [replace(f, size=old[f.name][0], mtime_ns=old[f.name][1]) for f in unit.load().streams if f.name in old]
        if len(files) != len(old):
            continue
        old_unit = Unit(owner, sum(f.size for f in files), partial(load_files, tuple(files)), label=unit.label,
                        newest=max(f.mtime_ns or 0 for f in files))
        recorded_files = {name: recorded.get(name) for name in old}
        growing[owner] = Growth(unit, old_unit, recorded_files, texts[owner])
    return growing


def same_head(before: object, now: object, size_mtime: tuple[int, int]) -> bool:
    """Whether a file's head entries (`FileTable.heads`) of the previous run and of this one give the
    same IDs, the previous one being of the file as fingerprinted then."""
    return head_unchanged(before, *size_mtime) and isinstance(now, list) and before[2:] == now[2:]


@dataclass(frozen=True)
class DeltaTask:
    """A chunk of grown groups re-run as a delta, described in full: it pickles, and runs (`run`)
    wherever the run's executor sends it, as a batch does (batch/run/task.py)."""

    part: str  # the name of the part files of its new rows
    order: tuple[str, ...]  # its groups, in the order of the chunk
    growing: dict[str, Growth]  # of its groups
    held: dict[tuple[str, bool], dict[str, int]]  # the previous batches' rows of its groups, by (table, work)
    run_folder: Path
    tool_results: ToolResults

    def run(self, stop: Stop) -> DeltaResult:
        """Convert the groups as they were and as they are, with every CPU of the machine (a delta runs
        alone), and write the delta's parts (`_write_delta`); a chunk that runs out of memory writes
        nothing and says so."""
        owners = sorted(self.order)
        given = ("", self.tool_results, task.hasher(), 1, stop)
        try:
            with BatchFiles(self.run_folder, self.part) as files:
                old, new = Captured(files.spill), Captured(files.spill)
                before = task.convert_batch([self.growing[o].old for o in owners], old, *given)
                after = task.convert_batch([self.growing[o].new for o in self.order], new, *given)
                result = _write_delta(files, self.part, owners, self.growing, before, after, old, new, self.held)
                files.commit()
        except Exception as exc:
            if stop.event.is_set() or not sql.out_of_memory(exc):
                raise
            return DeltaResult(None, set(), {}, out_of_memory=str(exc))
        return result


@dataclass
class DeltaResult:
    """What a delta wrote: its batch's state entry, its groups whose files were rewritten (not
    appended to), and per (table, work) the groups that fall back to their rows whole; or, when it did
    not fit, `out_of_memory` (DuckDB's error) and nothing written."""

    entry: Batch | None
    rewritten: set[str]
    fails: dict[tuple[str, bool], set[str]]
    out_of_memory: str | None = None


def run_deltas(
    growing: dict[str, Growth], touched: list[Batch], splits: dict[str, list[Piece] | None],
    tool_results: ToolResults, batch_bytes: int, used: set[str], shared: Shared, run_folder: Path, converting: int,
) -> tuple[list[Batch], dict, dict, set[str]]:
    """Re-run the grown groups as deltas (`DeltaTask`, a chunk of them a task, on the run's executor
    `shared`, batch/run/executors.py, started for them and the `converting` groups converted after;
    one at a time, with every CPU of its machine: a delta holds its conversion as it was while it
    converts it as it is):
    convert each group's files as they were (read up to their previous sizes) and as they are, and per
    table (output and `_work/`) write only the new rows that are not among the old ones, when the old
    rows are all among the new ones (as multisets, every column equal) and are as many as the previous
    batches hold (a group's rows do not depend on the batch it is converted in). Otherwise (a table
    where rows changed, a file whose previous bytes changed: its SHA-256 differs from the one
    recorded) the group's new rows of that table are written whole and its previous rows are dropped
    from the batches holding them.

    A chunk of groups that runs out of memory is left out: those groups are returned, to be converted
    whole as groups that changed (with the batches' retries, `_convert`).

    Returns the new batches' state entries, the groups whose previous rows go, by (table, work) and
    None for every table, the manifest's summary of it, and the groups left out."""
    held = _held_rows(touched, splits, growing)
    chunks = [[u.owner for u in chunk] for chunk in batches([g.new for g in growing.values()], max_bytes=batch_bytes)]
    shared.pool(len(chunks) + converting)
    tasks = []
    for order in chunks:  # (the parts named here, in the chunks' order: the same whatever ends first)
        owners = sorted(order)
        tag = hashlib.sha256(json.dumps([fingerprint_entries(growing[o].fp) for o in owners]).encode()).hexdigest()
        tasks.append(DeltaTask(
            reuse.unique_part(reuse.part_id([*owners, f"delta:{tag}"]), used), tuple(order),
            {o: growing[o] for o in order},
            {key: {o: n for o, n in rows.items() if o in order} for key, rows in held.items()},
            run_folder, tool_results,
        ))
    dropped: dict = {None: set()}
    entries, fell_back, whole = [], {}, set()
    for delta in tasks:
        result = shared.run_alone(delta)
        if result.out_of_memory is not None:
            whole.update(delta.order)  # converted whole instead, as changed groups, with the batches' retries
            continue
        dropped[None] |= result.rewritten
        for key, fail in result.fails.items():
            _note_fallback(key, fail, result.rewritten, dropped, fell_back)
        entries.append(result.entry)
    summary = {
        "session_groups": len(growing) - len(whole),
        "rewritten": len(dropped[None]),
        "tables_fell_back": dict(sorted(fell_back.items())),
        # groups whose delta ran out of memory: converted whole, as groups that changed
        **({"converted_whole": len(whole)} if whole else {}),
    }
    return entries, dropped, summary, whole


def _held_rows(
    touched: list[Batch], splits: dict[str, list[Piece] | None], growing: dict[str, Growth]
) -> dict[tuple[str, bool], dict[str, int]]:
    """The rows the previous batches hold of each grown group, by (table, work)."""
    held: dict[tuple[str, bool], dict[str, int]] = {}
    for batch in touched:
        for p in splits[batch.part]:
            for owner, n in p.by_group.items():
                if owner in growing:
                    held.setdefault((p.table, p.work), {})
                    held[(p.table, p.work)][owner] = held[(p.table, p.work)].get(owner, 0) + n
    return held


def _write_delta(
    files: BatchFiles, part: str, owners: list[str], growing: dict[str, Growth], before, after, old: Captured,
    new: Captured, held: dict,
) -> DeltaResult:
    """Write a chunk's delta, converted as it was (`before`, into `old`) and as it is (`after`, into
    `new`), as the parts `part` of one new batch (`files`)."""
    # a file whose previous bytes changed was rewritten, not appended to
    read = {i["path"]: i.get("sha256") for i in before.inputs}
    rewritten = {o for o in owners if any(sha is None or read.get(n) != sha for n, sha in growing[o].files.items())}
    path_owner = {name: o for o in owners for name, *_ in fingerprint_entries(growing[o].fp)}
    key_owner = {
        i["session_key"]: path_owner[i["path"]]
        for i in [*before.inputs, *after.inputs] if i.get("session_key") and i["path"] in path_owner
    }
    counts, work_tables, rows_by_group, fails = {}, set(), RowsByGroup(owners), {}
    for key in sorted(old.frames.keys() | new.frames.keys()):
        table, work = key
        frame_old, frame_new = old.frames.pop(key, None), new.frames.pop(key, None)
        if frame_new is None:
            frame_new = frame_old.clear()
        if frame_old is None:
            frame_old = frame_new.clear()
        # work tables too: their rows hold no value of the batch as a whole (no ordinal
        # or rank over the batch's lines; `stream_ord` is the record's seq in its stream)
        group = group_of(frame_new.columns, path_owner, key_owner, owners)
        rows, fail = difference(frame_old, frame_new, group, owners, held.get(key, {}), rewritten)
        if fail:
            fails[key] = fail
        if rows.height:
            if work:
                files.write_work(table, rows)
                work_tables.add(table)
            else:
                with files.open(TABLES_BY_NAME[table]) as writer:
                    writer.append(rows)
                counts[table] = writer.rows
            rows_by_group.add(part_label(table, work), rows)
    recorded = rows_by_group.result((path_owner, key_owner))
    entry = Batch(
        part, {o: growing[o].fp for o in owners}, tuple(after.inputs), tuple(tuple(s) for s in after.skipped), counts,
        tuple(name for name in WORK_SCHEMAS if name in work_tables),
        {k: tuple(v) for k, v in recorded.items()} if recorded is not None else None,
    )
    return DeltaResult(entry, rewritten, fails)


def _note_fallback(
    key: tuple[str, bool], fail: set[str], rewritten: set[str], dropped: dict, fell_back: dict[str, int]
) -> None:
    """Note the groups of a table that fall back to their rows whole: their previous rows go, and
    those not rewritten are counted by the table's shown name."""
    table, work = key
    dropped.setdefault(key, set()).update(fail)
    if fail - rewritten:
        shown = f"{WORK}/{table}" if work else table
        fell_back[shown] = fell_back.get(shown, 0) + len(fail - rewritten)


def difference(
    old: pl.DataFrame, new: pl.DataFrame, group: pl.Expr | None, owners: list[str], held: dict[str, int],
    forced: set[str],
) -> tuple[pl.DataFrame, set[str]]:
    """The rows of `new` not among those of `old`, as multisets, group by group (`group`), and the
    groups that fall back: their old rows are not all among their new ones, or are not as many as
    the previous batches hold (`held`), or they are `forced`; those get all their new rows.
    Rows are matched by a hash of every column, and the matched pairs are then compared whole."""
    everyone = set(owners)
    if group is None or old.schema != new.schema:
        return new, everyone
    old_group, new_group = old.select(group.alias("_g")).to_series(), new.select(group.alias("_g")).to_series()
    if old_group.null_count() or new_group.null_count():
        return new, everyone

    def keyed(frame: pl.DataFrame, groups: pl.Series, index: str) -> pl.DataFrame:
        hashes = frame.hash_rows() if frame.height else pl.Series("_h", [], pl.UInt64)
        return (
            pl.DataFrame({"_g": groups, "_h": hashes})
            .with_row_index(index)
            .with_columns(_k=pl.int_range(pl.len(), dtype=pl.UInt32).over("_g", "_h"))
        )

    o, n = keyed(old, old_group, "_o"), keyed(new, new_group, "_n")
    pairs = o.join(n, on=["_g", "_h", "_k"], how="inner")
    if not old[pairs.get_column("_o")].equals(new[pairs.get_column("_n")], null_equal=True):
        return new, everyone  # two different rows with the same hash
    had = dict(o.group_by("_g").len().iter_rows())
    matched = dict(pairs.group_by("_g").len().iter_rows())
    fail = {g for g in owners if had.get(g, 0) != matched.get(g, 0) or had.get(g, 0) != held.get(g, 0)} | (forced & everyone)
    fresh = ~n.get_column("_n").is_in(pairs.get_column("_n").implode()) | new_group.is_in(list(fail))
    return new.filter(fresh), fail
