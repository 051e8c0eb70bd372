"""Bring an output written before a work table was added up to this version, so that a run reuses it.

A work table that a batch's own output tables give (`DERIVED`) is derived for each batch of the
output from its parts, by the statement that builds it in a batch (sql/batch/<folder>/<name>.sql), its
relations read from the batch's parts of the output tables. The upgrade is a run of its own: the
previous output's parts, manifest and catalog are hard-linked into a run folder beside it, the
derived parts and the new reuse state written there, and the folder swapped in (`Output.commit`).
The output tables' rows, the manifest and the catalog stay as they were; a kill leaves the output
as it was. Without the upgrade such an output could only be replaced (`--prune`), dropping the
sessions whose sources are gone. docs/decisions/013-work-table-upgrade.md.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import duckdb
import polars as pl

from batch import sql
from batch.incremental import carving
from batch.incremental import state
from batch.incremental.state import Batch, State
from batch.output.folder import Output, is_ours
from batch.run import task
from batch.schema import TABLES_BY_NAME
from batch.schema.work import WORK_SCHEMAS

# Each work table an upgrade derives, with the output table each relation its statement reads is
# read from where the two names differ (`records_full` is a batch's `records` with more columns).
DERIVED: dict[str, dict[str, str]] = {
    "unowned_summaries": {"records_full": "records"},
}


def read_upgraded_state(out: Path) -> tuple[State | None, list[str]]:
    """The reuse state of the output `out` when this version can reuse it, once the output is upgraded
    when it lacks only work tables of `DERIVED`; and the names of the work tables derived."""
    previous = state.read(out) if is_ours(out) else None
    if previous is None or previous.tables == state.tables_digest():
        return previous, []
    names = next(
        (set(names) for n in range(1, len(DERIVED) + 1) for names in itertools.combinations(sorted(DERIVED), n)
         if previous.tables == state.tables_digest(frozenset(names))),
        None,
    )
    if names is None:  # other columns: not an output this version can reuse
        return None, []
    _upgrade(out, previous, names)
    return state.read(out), sorted(names)


def _upgrade(out: Path, previous: State, names: set[str]) -> None:
    """Derive the work tables `names` for each batch of the output `out` (reuse state `previous`) and
    swap the upgraded output in."""
    output = Output(out)
    try:
        output.reuse_whole()
        con = duckdb.connect()
        try:
            sql.define_macros(con)
            batches = []
            for batch in previous.batches:
                for name in sorted(names):
                    batch = _derive(con, output, batch, name)
                batches.append(batch)
        finally:
            con.close()
        state.write(output.tmp, previous.with_batches(batches))
        output.commit()
    except BaseException:
        output.abort()
        raise


def _derive(con: duckdb.DuckDBPyConnection, output: Output, batch: Batch, name: str) -> Batch:
    """Write the work table `name` of one batch of the previous output from its parts; return the
    batch's state entry with it (its `work`, and its rows per group when it records them)."""
    tables = {relation: DERIVED[name].get(relation, relation) for relation in sql.reads(name)}
    parts = {table: output.out / table / f"part-{batch.part}.parquet" for table in tables.values()}
    present = {table for table, path in parts.items() if table in batch.counts and path.is_file()}
    if not present:  # a batch without any of the rows it reads (the run's own part of the scans' rows)
        return batch
    for relation, table in tables.items():
        rows = con.read_parquet(str(parts[table])) if table in present else con.from_arrow(
            TABLES_BY_NAME[table].schema.empty_table()
        )
        rows.create_view(relation, replace=True)
    data = pl.from_arrow(task.cast(WORK_SCHEMAS[name], [sql.frame(con, name)]))  # as a batch writes it
    output.write_work(name, data, batch.part)
    work = tuple(sorted({*batch.work, name}))  # as a task lists them
    if batch.rows is None:
        return replace(batch, work=work)
    label = carving.part_label(name, True)
    counter = carving.RowsByGroup(sorted(batch.groups))
    counter.add(label, data)
    rows = counter.result(carving.key_owners(batch.groups, batch.inputs, batch.skipped, {}))
    if rows is None:  # told from the parts' key columns when carved
        return replace(batch, work=work, rows=None)
    return replace(batch, work=work, rows={**batch.rows, label: tuple(rows[label])})
