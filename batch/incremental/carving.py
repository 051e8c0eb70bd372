"""Which rows of a previous output belong to which session group, and carving them out.

A batch's parts hold the rows of several session groups; an incremental run keeps some groups of a
batch and converts others again. `split` reads a previous batch's parts by group (their key
columns only, or the rows per group its state records), `carve` writes the rows of the groups kept
as new parts (a part that loses no row is linked as it is), and `keep_previous` keeps the rows of a
group this run could not convert. `RowsByGroup` counts the rows of each new part per group, for the
reuse state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from batch import reuse
from batch.errors import OutputError
from batch.incremental.state import Batch, State, group_texts
from batch.schema import TABLES_BY_NAME
from batch.output.folder import WORK, Output
from batch.output.parts import BatchFiles
from batch.sources.base import fingerprint_entries

# the columns that tell a row's session group (`split`)
CARVE_KEYS = ("source_file", "session_key", "child_session_key", "parent_session_key")


@dataclass
class Piece:
    """A part of a previous batch, with its rows per group (`by_group`), and the group of each of
    its rows (`owners`) when its key columns were read (None when it has no rows, or when its rows
    per group were taken from the state's `rows`: `carve` tells them from the part when it reads it)."""

    table: str
    work: bool
    source: Path
    owners: pl.Series | None
    rows: int
    by_group: dict[str, int]
    keys: tuple[dict, dict, list[str]]  # what tells a row's group: `key_owners` and the batch's groups


def path_owners(groups: Mapping[str, str | None]) -> dict[str, str | None]:
    """The group of each file the groups' fingerprints name (None: named by two groups)."""
    path_owner: dict[str, str | None] = {}
    for owner, fp in group_texts(groups):
        for name, *_ in fingerprint_entries(fp):
            path_owner[name] = owner if path_owner.get(name, owner) == owner else None
    return path_owner


def session_owners(batches: Sequence[Batch], groups: set[str]) -> dict[str, str]:
    """The group of each session among the inputs the batches record (a group's inputs are
    recorded by one of the batches holding its rows): the first they give, for the sessions of which
    that is one of `groups`. Held for those sessions only: the batches holding `groups` name them,
    then every batch is read for the first group of each."""
    holding = (b for b in batches if groups & b.groups.keys())
    wanted = {key for key, owner in session_owner_pairs(holding) if owner in groups}
    keys: dict[str, str] = {}
    for key, owner in session_owner_pairs(batches) if wanted else ():
        if key in wanted:
            keys.setdefault(key, owner)
    return {key: owner for key, owner in keys.items() if owner in groups}


def session_owner_pairs(batches: Iterable[Batch]) -> Iterator[tuple[str, str]]:
    """Each input's session and the group it is of, in the batches' order (`session_owners`)."""
    for batch in batches:
        path_owner = path_owners(batch.groups)
        for i in batch.inputs:
            owner = path_owner.get(i["path"])
            if owner is not None and i.get("session_key"):
                yield i["session_key"], owner


def session_group(column: pl.Expr, key_owner: dict[str, str], groups: list[str]) -> pl.Expr:
    """The group of a session key: the one `key_owner` gives, else the group whose main session it
    is nested in (`<owner>/...`, one of `groups`); null when neither tells."""
    nested = column.str.split("/").list.first()
    return column.replace_strict(key_owner, default=None, return_dtype=pl.String).fill_null(
        pl.when(nested.is_in(groups)).then(nested)
    )


def group_of(columns: list[str], path_owner: dict, key_owner: dict[str, str], groups) -> pl.Expr | None:
    """A row's group: that of its source file when it names one of `path_owner`, else that of its
    session (one of `key_owner`, or one nested in a group's main session, `<owner>/...`).
    `lineage_evidence` rows go by their child session when the parent is of the same group or of none."""
    groups = list(groups)

    def by_key(column: pl.Expr) -> pl.Expr:
        return session_group(column, key_owner, groups)

    if "child_session_key" in columns:  # lineage_evidence
        child, parent = by_key(pl.col("child_session_key")), by_key(pl.col("parent_session_key"))
        return pl.when(parent.is_null() | (parent == child)).then(child)
    if "source_file" in columns:
        from_file = pl.col("source_file").replace_strict(path_owner, default=None, return_dtype=pl.String)
        return from_file.fill_null(by_key(pl.col("session_key"))) if "session_key" in columns else from_file
    if "session_key" in columns:
        return by_key(pl.col("session_key"))
    return None


def key_owners(groups: Mapping, inputs: tuple[dict, ...], skipped, keys: dict[str, str]) -> tuple[dict, dict] | None:
    """The group of each file (`path_owners`) and of each session of a batch (its inputs', and
    those of `keys` that are of its groups: `session_owners`); None when an input or a skipped
    path is of no group, or of two."""
    path_owner = path_owners(groups)
    if any(path_owner.get(path) is None for path, *_ in skipped):
        return None
    key_owner = {k: o for k, o in keys.items() if o in groups}
    for i in inputs:
        owner = path_owner.get(i["path"])
        if owner is None:
            return None
        if i.get("session_key"):
            key_owner[i["session_key"]] = owner
    return path_owner, key_owner


def owners_of(frame: pl.DataFrame, path_owner: dict, key_owner: dict[str, str], groups: list[str]) -> pl.Series | None:
    """The group of each row of `frame` (`group_of`); None when a row's group cannot be told."""
    group = group_of(frame.columns, path_owner, key_owner, groups)
    if group is None:
        return None
    owners = frame.select(group.alias("_group")).get_column("_group")
    return None if owners.null_count() else owners


def part_label(table: str, work: bool) -> str:
    """A table's name in the state's `rows`: a work table's under `_work/`."""
    return f"{WORK}/{table}" if work else table


class RowsByGroup:
    """The rows of a batch's parts per group (the state's `rows`), gathered as the parts are
    written: each part's distinct key values with their row counts, mapped to groups at the end,
    once per set of key columns (`owners_of`)."""

    def __init__(self, groups: list[str]) -> None:
        self.groups = groups
        self.rows: dict[str, list[int]] = {}
        self.keyed: dict[tuple[str, ...], list[pl.DataFrame]] = {}
        self.told = True

    def add(self, label: str, data: pl.DataFrame | pa.Table) -> None:
        names, height = (data.column_names, data.num_rows) if isinstance(data, pa.Table) else (data.columns, data.height)
        keys = tuple(c for c in CARVE_KEYS if c in names)

        def counted() -> pl.DataFrame:
            frame = pl.from_arrow(data.select(keys)) if isinstance(data, pa.Table) else data.select(keys)
            return frame.group_by(keys).agg(pl.len().alias("_n"))

        self._add(label, keys, not height, counted)

    def add_counted(self, label: str, counted: pl.DataFrame) -> None:
        """`add` of a part's rows given as the count (`_n`) of each distinct value of its key columns
        (a column `no_key` alone when it has none), as the part's relation in DuckDB counts them."""
        keys = tuple(c for c in CARVE_KEYS if c in counted.columns)
        self._add(label, keys, counted.is_empty(), lambda: counted)

    def _add(self, label: str, keys: tuple[str, ...], empty: bool, counted: Callable[[], pl.DataFrame]) -> None:
        """A part's rows: none (its count per group is 0), rows without key columns (no row's group
        can be told), or the count of each distinct value of `keys` (`counted()`)."""
        if empty:
            self.rows.setdefault(label, [0] * len(self.groups))
        elif not keys:
            self.told = False
        elif self.told:
            self.keyed.setdefault(keys, []).append(counted().with_columns(_t=pl.lit(label)))

    def result(self, maps: tuple[dict, dict[str, str]] | None) -> dict[str, list[int]] | None:
        """Each part's rows per group, in the order of the groups (sorted), given the group of each
        file and session (`key_owners`); None when a row's group cannot be told."""
        if not self.told or maps is None:
            return None
        position = {g: i for i, g in enumerate(self.groups)}
        for keys, frames in self.keyed.items():
            frame = pl.concat(frames, how="vertical_relaxed")
            owners = owners_of(frame.select(keys), *maps, self.groups)
            if owners is None:
                return None
            found = frame.select("_t", owners.alias("_g"), "_n").group_by("_t", "_g").agg(pl.col("_n").sum())
            for label, group, n in found.iter_rows():
                self.rows.setdefault(label, [0] * len(self.groups))[position[group]] = int(n)
        return dict(sorted(self.rows.items()))


def recorded_rows(batch: Batch) -> dict[str, dict[str, int]] | None:
    """A previous batch's rows per part and group as its state entry records them (`rows`: per
    table, a count per group in the order of its sorted groups), when they fit its parts' row
    counts; None when they are not recorded (a state of an earlier version) or do not fit."""
    rows, groups = batch.rows, sorted(batch.groups)
    tables = {*batch.counts, *(part_label(t, True) for t in batch.work)}
    if rows is None or rows.keys() != tables:
        return None
    found = {}
    for label, counts in rows.items():
        if label in batch.counts and sum(counts) != batch.counts[label]:
            return None
        found[label] = {g: n for g, n in zip(groups, counts) if n}
    return found


def split(output: Output, batch: Batch, keys: dict[str, str]) -> list[Piece] | None:
    """The parts of a previous batch with their rows per group: as the state records them (`rows`),
    else told from the key columns; None when a part is gone or a row's group cannot be told
    (`keys`: `session_owners`)."""
    groups = batch.groups
    maps = key_owners(groups, batch.inputs, batch.skipped, keys)
    if maps is None:
        return None
    path_owner, key_owner = maps
    recorded = recorded_rows(batch)
    pieces = []
    for tables, work in ((list(batch.counts), False), (batch.work, True)):
        for table in tables:
            source = (output.out / WORK / table if work else output.out / table) / f"part-{batch.part}.parquet"
            if source.is_symlink() or not source.is_file():
                return None
            piece = Piece(table, work, source, None, 0, {}, (path_owner, key_owner, list(groups)))
            if recorded is not None:
                piece.by_group = recorded[part_label(table, work)]
                piece.rows = sum(piece.by_group.values())
                pieces.append(piece)
                continue
            meta = pq.read_metadata(source)
            if not meta.num_rows:
                pieces.append(piece)
                continue
            names = meta.schema.to_arrow_schema().names
            frame = pl.read_parquet(source, columns=[c for c in CARVE_KEYS if c in names])
            owners = owners_of(frame, path_owner, key_owner, list(groups))
            if owners is None:
                return None
            piece.owners, piece.rows = owners, meta.num_rows
            piece.by_group = dict(owners.value_counts().iter_rows())
            pieces.append(piece)
    return pieces


@dataclass(frozen=True)
class CarveTask:
    """The carving of one previous batch (`carve`), described in full: it pickles, and runs (`run`)
    wherever the run's executor sends it, as a batch does (batch/run/task.py), its parts written
    under temporary names until whole (`BatchFiles`)."""

    batch: Batch
    pieces: list[Piece]  # its parts, split by group (`split`)
    keep: frozenset[str]
    part: str  # the name of the new parts
    run_folder: Path
    out: Path  # the previous output (named in errors)
    dropped: dict | None = None
    growing: dict[str, str] | None = None  # its grown groups re-run as deltas, with their current fingerprint

    def run(self, stop=None) -> Batch | None:
        with BatchFiles(self.run_folder, self.part) as files:
            entry = carve(files, self)
            files.commit()
        return entry


def carve(files: BatchFiles, task: CarveTask) -> Batch | None:
    """Write the rows of the groups `task.keep` of a previous batch (split by `split`) as the parts
    `files`, and return their state entry (None when no group is left).

    A part whose rows are all kept is linked under the new name as it is; the others are read
    whole, filtered and written again. The batch's grown groups re-run as deltas (`task.growing`) keep
    their rows too, but in the tables where `task.dropped` (by (table, work), or None for every table)
    says their new rows were written whole; the entry lists them, with their current fingerprint,
    when rows of them are left."""
    batch, keep, dropped, growing = task.batch, task.keep, task.dropped, task.growing
    groups = batch.groups
    delta = sorted(growing.keys() & groups.keys()) if growing else []
    plan_parts = []
    remaining: set[str] = set()
    for p in task.pieces:
        gone = (dropped.get(None, set()) | dropped.get((p.table, p.work), set())) if dropped else set()
        kept = {*keep, *(g for g in delta if g not in gone)}
        remaining.update(g for g in delta if g in kept and p.by_group.get(g))
        plan_parts.append((p, kept))
    if not keep and not remaining:
        return None
    counts, work_tables, rows_by_group = {}, [], {}
    listed = sorted({*keep, *remaining})
    for p, kept in plan_parts:
        rows = p.rows
        if all(g in kept for g in p.by_group):  # the part loses no row: linked as it is
            files.link(p.source, p.table, work=p.work)
        else:
            frame = pl.read_parquet(p.source)
            owners = p.owners if p.owners is not None else owners_of(frame, *p.keys)
            if owners is None or dict(owners.value_counts().iter_rows()) != p.by_group:
                raise OutputError(
                    f"the rows of {p.source} are not those the reuse state of {task.out} records: "
                    "convert again with --full."
                )
            frame = frame.filter(owners.is_in(list(kept)))
            if p.work:
                files.write_work(p.table, frame)
            else:
                with files.open(TABLES_BY_NAME[p.table]) as writer:
                    writer.append(frame)
            rows = frame.height
        if p.work:
            work_tables.append(p.table)
        else:
            counts[p.table] = rows
        rows_by_group[part_label(p.table, p.work)] = tuple(p.by_group.get(g, 0) if g in kept else 0 for g in listed)
    path_owner = path_owners(groups)
    names = {name for owner in keep for name, *_ in fingerprint_entries(groups[owner])}
    entry = {owner: groups[owner] for owner in keep}
    entry.update((owner, growing[owner]) for owner in remaining)
    return Batch(
        task.part, dict(sorted(entry.items())), tuple(i for i in batch.inputs if i["path"] in names),
        tuple(s for s in batch.skipped if path_owner.get(s[0]) in keep), counts, tuple(work_tables), rows_by_group,
    )


def keep_previous(
    output: Output, state: State | None, splits: dict[str, list[Piece] | None], batches: Sequence[Batch], owner: str,
    used: set[str],
) -> list[Batch]:
    """The rows an earlier run wrote of a group this run could not convert, carved out of the
    previous batches holding them (still in the previous output: the swap comes later), as state
    entries with the fingerprint of that run: the next run tries the group again. None when the
    group is new, or when its rows cannot be told apart by group (then they go, as before).
    `batches`: every batch of the previous state (`session_owners`)."""
    entries = []
    for old in state.batches if state else ():
        if owner not in old.groups:
            continue
        if old.part not in splits:
            splits[old.part] = split(output, old, session_owners(batches, set(old.groups)))
        if splits[old.part] is None:
            continue
        part = reuse.unique_part(reuse.part_id([owner, f"previous:{old.part}"]), used)
        carved = CarveTask(old, splits[old.part], frozenset({owner}), part, output.tmp, output.out).run()
        if carved is not None:
            entries.append(carved)
    return entries
