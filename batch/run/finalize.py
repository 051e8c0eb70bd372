"""The final stage, over every part of a run: the cross-session tables (`sessions`, `inferences`,
`lineage`, `losses`, ...) built by DuckDB from the batches' output and work tables, the tables
sources fill once per run, and the manifest. Runs in the process that planned the run, after
every task (docs/performance.md, "The final stage at scale")."""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batch import reuse, sql
from batch.incremental import carving
from batch.incremental.state import InputEntries
from batch.run import task
from batch.run.memory import Stop, Stopped
from batch.schema import TABLES, TABLES_BY_NAME
from batch.schema.entire import GIT_OBJECTS, GIT_REFS
from batch.schema.work import WORK_SCHEMAS
from batch.sources import registry
from batch.sources.entire import held
from batch.sources.skipped import Skipped
from batch.version import ARCHIVE_FORMAT, FORMAT_NAME, FORMAT_VERSION, PRODUCER, VERSION
from batch.output import manifest as manifest_file
from batch.output.folder import WORK, Output

SOURCE_LOSSES = "source_losses"
# What the final stage reports in the manifest besides its tables (sql/<name>.sql).
MANIFEST_RELATIONS = ("unassigned_facts", "absent_files")
# Output tables of the final stage that sources fill once per run (Entire checkpoints and trailers).
SOURCE_TABLES = registry.RUN_TABLES
FINAL_TABLE_NAMES = [t.name for t in TABLES if t.stage == "final"]


def skipped_entries(output: Output, skipped: Skipped) -> manifest_file.Span:
    """The manifest's `skipped`, sorted by path, written to the run folder as its JSON text."""
    output.spill.mkdir(exist_ok=True)
    entries = (manifest_file.item_text({"path": p, "reason": r}) for p, r in skipped)
    return manifest_file.write_array(output.spill / "skipped.json", entries, encoded=True)


def _concat(schema: pa.Schema, frames: list[pl.DataFrame]) -> pl.DataFrame | pa.Table:
    """Frames of one output table from several formats and sources as one table (Output.write casts it)."""
    if len(frames) == 1:
        return frames[0]
    return task.cast(schema, frames)


# The rows sources give once per run (Entire's scans), by the column that names what they describe:
# a previous output's rows that this run's scans do not give again (a repository not given this
# time, a checkpoint pruned from one) are kept, as the session groups read from them are.
# The scans' losses are kept the same way, by category and detail (which names the checkpoint).
RUN_ROW_KEYS = {
    "checkpoints": ["checkpoint_id"], "checkpoint_sessions": ["checkpoint_id"], "checkpoint_commits": ["commit_id"],
    "vcs_events": ["commit_id"], "losses": ["category", "detail"],
}


# the part of the rows sources give once per run (`write_source_parts`), named by no group
RUN_PART = f"part-{reuse.part_id(())}.parquet"


def run_rows(root: Path) -> dict[str, pl.DataFrame]:
    """The run-level rows of the output `root` (the tables of `RUN_ROW_KEYS`, the scans' losses as
    `losses`), with this version's columns (those an earlier version did not write null)."""
    found = {}
    for name in RUN_ROW_KEYS:
        if name == "losses":  # the scans' losses are a work part of their own (`write_source_parts`)
            files, schema = [root / WORK / SOURCE_LOSSES / RUN_PART], WORK_SCHEMAS[SOURCE_LOSSES]
        elif TABLES_BY_NAME[name].stage == "batch":
            files, schema = [root / name / RUN_PART], TABLES_BY_NAME[name].schema
        else:
            files, schema = sorted((root / name).glob("part-*.parquet")), TABLES_BY_NAME[name].schema
        files = [f for f in files if f.is_file() and not f.is_symlink() and pq.read_metadata(f).num_rows]
        if files:
            rows = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
            rows = rows.with_columns(pl.lit(None).alias(c) for c in schema.names if c not in rows.columns)
            found[name] = pl.from_arrow(task.cast(schema, [rows]))
    return found


def keep_run_rows(frames: dict[str, list[pl.DataFrame]], before: dict[str, pl.DataFrame]) -> None:
    """Add to `frames` the run-level rows of an earlier output (`run_rows`) whose key this run's scans
    (and the earlier outputs' rows added before) do not give."""
    for name, rows in before.items():
        key = RUN_ROW_KEYS[name]
        given = pl.concat([f.select(key) for f in frames.get(name, [])]) if frames.get(name) else rows.clear().select(key)
        kept = rows.join(given.unique(), on=key, how="anti", nulls_equal=True)
        if kept.height:
            frames.setdefault(name, []).append(kept)


def write_source_parts(output: Output, frames: dict[str, list[pl.DataFrame]], index: str) -> dict[str, int]:
    """Write the rows sources contribute once per run to batch tables (vcs_events of commit trailers), as one
    more part after the batches' parts; the scans' losses as a part of the work table `source_losses`."""
    if frames.get("losses"):
        output.write_work(SOURCE_LOSSES, pl.from_arrow(task.cast(WORK_SCHEMAS[SOURCE_LOSSES], frames["losses"])), index)
    counts = {}
    for table in TABLES:
        if table.stage == "batch" and frames.get(table.name):
            counts[table.name] = output.write(table, _concat(table.schema, frames[table.name]), index)
    return counts


class HeldCopy:
    """`write_held` on a thread of its own, started before the tasks: reading a repository's objects
    and writing them (Git's inflate, zstd) runs beside the batches, which leave part of the CPUs idle."""

    def __init__(self, output: Output, imports: list, *, keep: bool, damaged: set[str], stop: Stop) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="held-copy")
        self._future = self._pool.submit(write_held, output, imports, keep=keep, damaged=damaged, stop=stop)

    def counts(self) -> dict[str, int]:
        """The rows written, once the copy is done (its error, if any, raised here)."""
        try:
            return self._future.result()
        finally:
            self._pool.shutdown()

    def wait(self) -> None:
        """Let the copy end (it stops at its next piece once the run is stopped), whatever became of it."""
        self._pool.shutdown(wait=True)


def write_held(
    output: Output, imports: list, *, keep: bool, damaged: set[str], stop: Stop | None = None,
) -> dict[str, int]:
    """Write what the output holds of each repository read (sources/entire/held.py), a part per repository:
    the previous output's part when the repository's references and trailer commits are the ones it
    holds (the objects are then the same), else its references now and their objects, those the previous
    part holds taken from it (only trees, commits and tags are read to find them). With `keep`, the
    previous output's parts of the repositories not read this time are kept (those not `damaged`)."""
    tables = (GIT_REFS, GIT_OBJECTS)
    counts = dict.fromkeys((t.name for t in tables), 0)
    written = set()
    for imp in imports:
        part = reuse.part_id(["git", imp.repository])
        if part in written:  # another repository of the same name (the rows name repositories by name): the first
            continue
        written.add(part)
        refs = held.refs_table(imp.repository, list(imp.refs))
        before = _held_part(output, part, damaged) if keep else None
        if before is not None and before.holds(refs, imp.trailers):
            for table in tables:
                output.link(output.out / table.name / f"part-{part}.parquet", table.name, part)
            continue
        output.write(GIT_REFS, refs, part)
        with output.open(GIT_OBJECTS, part) as objects:
            # the objects read now that the output lacks (a new checkpoint adds a few), then those it holds
            # that are still named
            known = set(before.ids["object_id"].to_pylist()) if before else set()
            kept: set[str] = set()
            for piece in held.object_pieces(Path(imp.git_path), imp.repository, list(imp.trailers), known, kept):
                if stop is not None and stop.event.is_set():
                    raise Stopped
                objects.append(piece)
            for i in range(before.objects.num_row_groups if before else 0):
                piece = before.objects.read_row_group(i)
                objects.append(piece.filter(pc.is_in(piece["object_id"], pa.array(sorted(kept), pa.string()))))
    if keep:
        for path in sorted((output.out / GIT_REFS.name).glob("part-*.parquet")):
            part = path.stem.removeprefix("part-")
            if part not in written and held.intact(output.out, path.name, damaged) and pq.read_metadata(path).num_rows:
                for table in tables:
                    output.link(output.out / table.name / path.name, table.name, part)
    for table in tables:
        counts[table.name] = sum(pq.read_metadata(f).num_rows for f in (output.tmp / table.name).glob("part-*.parquet"))
    return counts


@dataclass(frozen=True)
class _Held:
    """The previous output's held part of a repository: its references, its objects' file, and the ID
    and `read_as` of each object."""

    refs: pa.Table
    objects: pq.ParquetFile
    ids: pa.Table

    def holds(self, refs: pa.Table, trailers: tuple[str, ...]) -> bool:
        """Whether it is of these references and trailer commits (its objects are then the same)."""
        held_trailers = pc.filter(self.ids["object_id"], pc.equal(self.ids["read_as"], held.TRAILER)).to_pylist()
        return self.refs.sort_by("ref").equals(refs.sort_by("ref")) and sorted(held_trailers) == sorted(trailers)


def _held_part(output: Output, part: str, damaged: set[str]) -> _Held | None:
    """The previous output's held part `part`, when both its files are intact, else None."""
    name = f"part-{part}.parquet"
    if not held.intact(output.out, name, damaged):
        return None
    objects = pq.ParquetFile(output.out / GIT_OBJECTS.name / name)
    return _Held(pq.read_table(output.out / GIT_REFS.name / name), objects, objects.read(columns=["object_id", "read_as"]))


@dataclass(frozen=True)
class SourceReads:
    """Whether each session's source was found by this run, and when it was last read: the
    `sessions` columns `source_present` and `source_last_read_at`, by the session's group. Files of
    the run folder of a line per group (`reads`) and per input session (`groups`), written a line at a
    time, which `register` reads into DuckDB for `sessions_read` to join: the run holds neither."""

    reads: Path
    groups: Path

    @staticmethod
    def write(folder: Path, reads: Iterable[tuple[str, list]]) -> SourceReads:
        """From each group's reads (`history.reads`), a line at a time; the groups of the sessions
        are written by `with_groups`."""
        folder.mkdir(parents=True, exist_ok=True)
        found = SourceReads(folder / "source_reads.jsonl", folder / "session_groups.jsonl")
        with open(found.reads, "w", encoding="utf-8") as fh:
            for owner, (read_at, present) in reads:
                fh.write(json.dumps({"owner": owner, "present": present, "read_at": read_at}) + "\n")
        return found

    def items(self) -> Iterator[tuple[str, list]]:
        """The reads as written (as the reuse state holds them: owner, [last read at, found by this run])."""
        with open(self.reads, encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                yield r["owner"], [r["read_at"], r["present"]]

    def with_groups(self, batches: Iterable) -> SourceReads:
        """Write the group of each session among the batches' inputs (`carving.session_owners`), from
        their state entries."""
        with open(self.groups, "w", encoding="utf-8") as fh:
            for n, (key, owner) in enumerate(carving.session_owner_pairs(batches)):
                fh.write(json.dumps({"n": n, "session_key": key, "owner": owner}) + "\n")
        return self

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        """Read them as the tables `source_reads` and `session_groups`: a session's group is the first
        that the inputs give (as `carving.session_owners` tells it), else its own (a group's main
        session is of the group even when no input names it: an Entire session without transcript)."""
        def lines(path: Path, columns: str) -> str:
            return f"read_json({sql.quote(str(path))}, format = 'newline_delimited', columns = {{{columns}}})"

        reads = lines(self.reads, "owner: 'VARCHAR', present: 'BOOLEAN', read_at: 'VARCHAR'")
        groups = lines(self.groups, "n: 'BIGINT', session_key: 'VARCHAR', owner: 'VARCHAR'")
        con.execute(
            "create temp table source_reads as "
            f"select owner, present, try_cast(read_at as timestamptz) as read_at from {reads}"
        )
        con.execute(
            "create temp table session_groups as select session_key, arg_min(owner, n) as owner from ("
            f"select session_key, owner, n from {groups} "
            "union all select owner, owner, 9223372036854775807 from source_reads"
            ") group by session_key"
        )


# The sessions with their source's reads (SourceReads): a session's group is the one the inputs
# give, else the group its key is nested in (`<owner>/...`).
SESSIONS_READ = """
    select s.*, r.present as source_present, r.read_at as source_last_read_at,
    from sessions as s
    left join session_groups as g using (session_key)
    left join source_reads as r on r.owner = coalesce(g.owner, split_part(s.session_key, '/', 1))
    order by s.session_key
"""
# The losses the tables show, and those found at the source (absent blobs, hash mismatches, ...)
LOSSES_ALL = """
    select * from losses
    union all by name
    select * from read_parquet($files)
    order by session_key nulls first, category nulls first, detail nulls first, count nulls first
"""


def finalize(
    con: duckdb.DuckDBPyConnection, output: Output, run_frames: dict[str, list[pl.DataFrame]],
    sources_read: SourceReads, as_written: frozenset[str] = frozenset(),
) -> tuple[dict[str, int], manifest_file.Pieces, manifest_file.Span, dict[str, int]]:
    """Build the final tables in DuckDB from the batches' parts and write each by DuckDB itself:
    Python holds their counts and the manifest's short lists, no table (docs/performance.md, "The final
    stage at scale"). The parts `as_written` (batch/incremental/as_written.py) are not read: their
    final tables' rows are among them."""
    # The final stage reads the batches' parts of the output and work tables (as views of their
    # Parquet files) and builds the final tables from them, in the order of the files' headers.
    sql_files = set(sql.names())
    targets = [t.name for t in TABLES if t.stage == "final" and t.name in sql_files] + list(MANIFEST_RELATIONS)
    batch_tables = {t.name: t.schema for t in TABLES if t.stage == "batch"}
    given = {**batch_tables, **{n: s for n, s in WORK_SCHEMAS.items() if n != SOURCE_LOSSES}}
    steps = sql.order(targets, given=given)
    for name in sorted({dep for step in steps for dep in sql.reads(step)} & set(given)):
        work = name not in batch_tables
        files = output.files(name, work=work, without=as_written)
        if files:
            con.read_parquet(files).create_view(name)
        else:  # no batch held a row of it
            con.register(name, given[name].empty_table())
    sources_read.register(con)
    counts = {}
    # a table is dropped once written and read by every step that reads it: its memory (or its
    # spill) goes to the steps after it; the manifest's relations are read after the steps
    last = {dep: n for n, step in enumerate(steps) for dep in sql.reads(step)}
    held: list[str] = []
    for n, name in enumerate(steps):
        for done in [t for t in held if last.get(t, -1) < n and t not in MANIFEST_RELATIONS]:
            con.execute(f'drop table "{done}"')
            held.remove(done)
        sql.within_limit(con, lambda name=name: sql.materialize(con, name))
        held.append(name)
        if name in MANIFEST_RELATIONS or name not in TABLES_BY_NAME:  # (a step toward a table: read, not written)
            continue
        relation = name
        if name == "sessions":
            con.execute(f"create temp table sessions_read as {SESSIONS_READ}")
            relation = "sessions_read"
        if name == "losses" and output.has(SOURCE_LOSSES, work=True):
            con.execute(f"create temp table losses_all as {LOSSES_ALL}", {"files": output.files(SOURCE_LOSSES, work=True)})
            relation = "losses_all"
        if name == "losses":
            # losses found at the source, by category (the Entire summary line)
            entire_losses = dict(con.sql(
                f"select category, count(*) from {relation} where starts_with(category, 'entire.') "
                "group by category order by category"
            ).fetchall())
        counts[name] = sql.within_limit(con, lambda t=TABLES_BY_NAME[name], r=relation: output.copy(con, t, r))
        if relation != name:
            con.execute(f"drop table {relation}")
    for table in SOURCE_TABLES:
        if run_frames.get(table.name):
            counts[table.name] = output.write(table, _concat(table.schema, run_frames[table.name]))
    # the unassigned facts grow with the archive: written by DuckDB as the JSON text of the manifest's list
    output.spill.mkdir(exist_ok=True)
    facts = output.spill / "unassigned.json"
    con.execute(
        "copy (select kind, field, value, {'leafUuid': leaf_uuid} as \"references\", "
        "{'path': source_file, 'position': position} as source from unassigned_facts) "
        f"to {sql.quote(str(facts))} (format json, array true)"
    )
    # (but its final newline)
    unassigned = manifest_file.around({"com.anthropic.claude-code/unassigned": manifest_file.Span(
        facts, 0, facts.stat().st_size - 1)})
    # so do the absent files (the manifest's export_report.retention.absent_files)
    absent = output.spill / "absent.json"
    con.execute(
        "copy (select file_kind as kind, name, session_key, "
        "case when source_file is not null then {'path': source_file, 'position': position} end as referenced_by, "
        "'absent' as status, ['deleted_by_retention', 'not_copied', 'removed'] as possible_causes "
        f"from absent_files) to {sql.quote(str(absent))} (format json, array true)"
    )
    for name in held:  # written: their memory is the catalog's, which follows in the same DuckDB
        con.execute(f'drop table "{name}"')
    return counts, unassigned, manifest_file.Span(absent, 0, absent.stat().st_size - 1), entire_losses


def _version_key(version: str) -> tuple:
    # numeric parts in numeric order, before any text part ("2.1.9" < "2.1.10" < "2.1.x")
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in version.split("."))


@dataclass(frozen=True)
class WrittenInputs:
    """The manifest's `inputs`, written to the run folder as its JSON text (`write`), and what the
    manifest says of them: a run holds no entry per file from then on."""

    text: manifest_file.Span
    count: int
    size: int  # bytes read
    foreign: int  # files of another format
    versions: list[str]  # the Claude Code versions the lines name
    codex_versions: list[str] | None  # those of the Codex rollouts, None without any

    @staticmethod
    def write(output: Output, batches: Iterable[InputEntries]) -> WrittenInputs:
        """Write the batches' entries, in the order given and then by path (a stable sort), as the text
        of the manifest's value, beside the final stage's: each batch's entries sorted by path and
        spooled to a file of the run folder, then merged, a few of each batch's at a time, so that
        the run holds none of them (docs/performance.md, "A cluster run, on paper"). Each entry is
        parsed once, for what the manifest says of them."""
        output.spill.mkdir(exist_ok=True)
        spool = output.spill / "inputs.arrow"
        count, size, foreign, versions, codex_versions, codex = 0, 0, 0, set(), set(), False
        with pa.OSFile(str(spool), "wb") as sink, pa.ipc.new_file(sink, _ENTRIES) as writer:
            for entries in batches:
                run = []
                for text in entries.texts():
                    entry = json.loads(text)
                    run.append((entry["path"], manifest_file.item_text(entry)))  # as the manifest writes it
                    size += entry["size"]
                    foreign += entry["status"] == "foreign"
                    if entry.get("format") == registry.codex.FORMAT:
                        codex = True
                        codex_versions.update(entry.get("versions", []))
                    else:
                        versions.update(entry.get("versions", []))
                count += len(run)
                run.sort(key=lambda t: t[0])
                writer.write_batch(pa.record_batch([[p for p, _ in run], [t for _, t in run]], schema=_ENTRIES))
        with pa.memory_map(str(spool)) as source:
            file = pa.ipc.open_file(source)
            runs = [_entries(file.get_batch(i)) for i in range(file.num_record_batches)]
            # (heapq.merge keeps the order of the runs, that of their batches, between equal paths)
            merged = (t for _, t in heapq.merge(*runs, key=lambda e: e[0]))
            text = manifest_file.write_array(output.spill / "inputs.json", merged, encoded=True)
        spool.unlink()
        return WrittenInputs(
            text, count, size, foreign, sorted(versions, key=_version_key),
            sorted(codex_versions, key=_version_key) if codex else None,
        )


_ENTRIES = pa.schema([("path", pa.string()), ("text", pa.string())])
MERGE_ROWS = 16  # entries of each batch read at a time while they are merged


def _entries(rows: pa.RecordBatch) -> Iterator[tuple[str, str]]:
    """A batch's (path, entry text), read `MERGE_ROWS` at a time."""
    for start in range(0, rows.num_rows, MERGE_ROWS):
        piece = rows.slice(start, MERGE_ROWS)
        yield from zip(piece.column(0).to_pylist(), piece.column(1).to_pylist())


def manifest(
    output: Output,
    inputs: WrittenInputs,
    skipped: Skipped,
    counts: dict[str, int],
    unassigned: manifest_file.Pieces,
    absent: manifest_file.Span,
    imports: list,
    source_losses: dict[str, int],
    summary: dict,
) -> dict:
    rejected = counts.get("rejects", 0)
    report, extra = registry.export_report(inputs.versions, absent, imports, source_losses, inputs.codex_versions)
    return {
        "format": {"name": FORMAT_NAME, "version": FORMAT_VERSION},
        "producer": {"name": PRODUCER, "version": VERSION},
        # what the output holds and where (docs/asr-tables.md, "An output is a source"): every later
        # version reads an output of this archive format or an earlier one
        "archive": {"format": ARCHIVE_FORMAT},
        "inputs": inputs.text,
        "skipped": skipped_entries(output, skipped),
        "tables": {t.name: counts.get(t.name, 0) for t in TABLES},
        "rejected_lines": rejected - inputs.foreign,
        "foreign_files": inputs.foreign,
        "losses": counts.get("losses", 0),
        "export_report": manifest_file.around(report),  # its absent files as DuckDB wrote them
        **extra,
        "reuse": summary,
        "_meta": unassigned,  # {"com.anthropic.claude-code/unassigned": [...]}, as DuckDB wrote it (`finalize`)
    }
