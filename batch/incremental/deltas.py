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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from batch import reuse, sql
from batch.incremental.carving import Piece, RowsByGroup, group_of, part_label
from batch.incremental.state import Batch, State
from batch.schema import TABLES_BY_NAME
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import CLAUDE_CODE, Unit, batches, fingerprint_entries
from batch.sources.claude_code import Discovery, head_unchanged, load_files
from batch.output.folder import WORK, Output
from batch.output.parts import conform

if TYPE_CHECKING:
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
    heads = state.heads
    by_owner: dict[str, list[Unit]] = {}
    for unit in units:
        by_owner.setdefault(unit.owner, []).append(unit)
    shared = {
        o for b in batches_before
        if any(reuse.unchanged(u, fp, current, plan.kept) for u, fp in b.groups.items())
        for o in b.groups
    }
    candidates = [
        owner for owner in sorted(plan.changed & shared)
        if len(by_owner.get(owner, [])) == 1 and by_owner[owner][0].size <= batch_bytes
        and reuse.grown(before.get(owner), current.get(owner))
    ]
    recorded = state.recorded(set(candidates))
    # what discovery read of their files' heads, by name (Claude Code transcripts only)
    found_heads = dict(found.files.heads(
        {e[0] for o in candidates for e in fingerprint_entries(current[o])}, producer=CLAUDE_CODE
    ))
    growing = {}
    for owner in candidates:
        now = {name: (size, mtime) for name, size, mtime, _ in fingerprint_entries(current[owner])}
        if not all(name in found_heads for name in now):
            continue
        old = {name: (size, mtime) for name, size, mtime, _ in fingerprint_entries(before[owner])}
        # a file as fingerprinted before is unchanged, its head too (discovery took its entry out of `heads`)
        if not all(now.get(name) == old[name] or same_head(heads.get(name), found_heads.get(name), old[name])
                   for name in old):
            continue
        unit = by_owner[owner][0]  # a unit of transcript files: loading it lists them, it reads nothing
        files = [replace(f, size=old[f.name][0], mtime_ns=old[f.name][1]) for f in unit.load().streams if f.name in old]
        if len(files) != len(old):
            continue
        old_unit = Unit(owner, sum(f.size for f in files), partial(load_files, tuple(files)), label=unit.label,
                        newest=max(f.mtime_ns or 0 for f in files))
        growing[owner] = Growth(unit, old_unit, {name: recorded.get(name) for name in old}, current[owner])
    return growing


def same_head(before: object, now: object, size_mtime: tuple[int, int]) -> bool:
    """Whether a file's head entries (`FileTable.heads`) of the previous run and of this one give the
    same IDs, the previous one being of the file as fingerprinted then."""
    return head_unchanged(before, *size_mtime) and isinstance(now, list) and before[2:] == now[2:]


def run_deltas(
    output: Output, growing: dict[str, Growth], touched: list[Batch], splits: dict[str, list[Piece] | None],
    tool_result_files: set[str], batch_bytes: int, used: set[str], current: dict[str, str | None], stop: Stop,
    convert_batch: Callable,
) -> tuple[list[Batch], dict, dict, set[str]]:
    """Re-run the grown groups as deltas: convert each group's files as they were (read up to their
    previous sizes) and as they are, and per table (output and `_work/`) write only the new rows
    that are not among the old ones, when the old rows are all among the new ones (as multisets,
    every column equal) and are as many as the previous batches hold (a group's rows do not depend
    on the batch it is converted in). Otherwise (a table where rows changed, a file whose previous
    bytes changed: its SHA-256 differs from the one recorded) the group's new rows of that table
    are written whole and its previous rows are dropped from the batches holding them.

    A chunk of groups that runs out of memory is left out: those groups are returned, to be converted
    whole as groups that changed (with the batches' retries, `_convert`).

    `convert_batch` converts a batch into a capture (`run.task.convert_batch`).

    Returns the new batches' state entries, the groups whose previous rows go, by (table, work) and
    None for every table, the manifest's summary of it, and the groups left out."""
    held = _held_rows(touched, splits, growing)
    dropped: dict = {None: set()}
    entries, fell_back, whole = [], {}, set()
    with ThreadPoolExecutor(1) as hasher:
        for chunk in batches([g.new for g in growing.values()], max_bytes=batch_bytes):
            owners = sorted({u.owner for u in chunk})
            old, new = Captured(output.spill), Captured(output.spill)
            try:
                before = convert_batch([growing[o].old for o in owners], old, "", tool_result_files, hasher, 1, stop)
                after = convert_batch(chunk, new, "", tool_result_files, hasher, 1, stop)
            except Exception as exc:
                if stop.event.is_set() or not sql.out_of_memory(exc):
                    raise
                whole.update(owners)  # converted whole instead, as changed groups, with the batches' retries
                continue
            entries.append(_write_delta(output, owners, growing, before, after, old, new, held, current, used,
                                        dropped, fell_back))
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
    output: Output, owners: list[str], growing: dict[str, Growth], before, after, old: Captured, new: Captured,
    held: dict, current: dict[str, str | None], used: set[str], dropped: dict, fell_back: dict[str, int],
) -> Batch:
    """Write a chunk's delta, converted as it was (`before`, into `old`) and as it is (`after`, into
    `new`), as one new batch; note its rewritten and fallen-back groups in `dropped` and `fell_back`.
    Returns the batch's state entry."""
    # a file whose previous bytes changed was rewritten, not appended to
    read = {i["path"]: i.get("sha256") for i in before.inputs}
    rewritten = {o for o in owners if any(sha is None or read.get(n) != sha for n, sha in growing[o].files.items())}
    dropped[None] |= rewritten
    path_owner = {name: o for o in owners for name, *_ in fingerprint_entries(current[o])}
    key_owner = {
        i["session_key"]: path_owner[i["path"]]
        for i in [*before.inputs, *after.inputs] if i.get("session_key") and i["path"] in path_owner
    }
    tag = hashlib.sha256(json.dumps([fingerprint_entries(current[o]) for o in owners]).encode()).hexdigest()
    part = reuse.unique_part(reuse.part_id([*owners, f"delta:{tag}"]), used)
    counts, rows_by_group = {}, RowsByGroup(owners)
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
            _note_fallback(key, fail, rewritten, dropped, fell_back)
        if rows.height:
            if work:
                output.write_work(table, rows, part)
            else:
                counts[table] = output.write(TABLES_BY_NAME[table], rows, part)
            rows_by_group.add(part_label(table, work), rows)
    recorded = rows_by_group.result((path_owner, key_owner))
    return Batch(
        part, {o: current[o] for o in owners}, tuple(after.inputs), tuple(tuple(s) for s in after.skipped), counts,
        tuple(output.parts(part, list(WORK_SCHEMAS), work=True)),
        {k: tuple(v) for k, v in recorded.items()} if recorded is not None else None,
    )


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
