"""The converter of one batch of Claude Code streams: the batch kept in DuckDB tables from the
hand-over of its lines to the writer (see the package's docstring).

1. `_load`: the lines of each read slice (formats/lines.py) appended to `stage_lines`, blank lines
   marked (Polars' Unicode white space), each line numbered in read order (`row_order`), and the
   reduced text of a line whose long strings are elided beside it (transforms/elide.py).
2. `_observe`: the envelope decode (sql/batch/decode/observations.sql) of every line, once, classified
   (sql/batch/decode/classify.sql) into `observations`, with the line's text as `json`; the lines that are
   not one object recovered (transforms/recover.py, on those lines alone) and decoded after them;
   the lines then keep their text only where a later step reads it.
3. `_narrow`: foreign files and versions, the subagents rebuilt from agent_progress copies, the inline
   sidechains split, the observations numbered (`ord`) and named `classified`, then observation_index,
   observation_keys, record_table and call_pairs.
4. `_fold`: number_faults, records_full (a view: its texts are the observations'), parts, source
   lines, rejects and tool calls over the whole batch: DuckDB spills what does not fit its limit.
5. `_statements`: every other statement of sql/batch/, each into a table, beside another batch's
   statements (the hold of the largest ones, sql.hold, ends here); after each, the tables no later
   statement reads are let go of: an output table written, any other dropped.

Each table is handed to the batch's writer by the name of its relation (run/task.py
`BatchParts.add_relation`): as soon as no later statement reads it, or after the last one.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

import duckdb
import polars as pl

from batch import sql
from batch.errors import SqlError
from batch.formats.base import Converted
from batch.formats.claude_code import streams
from batch.formats.claude_code.streams import Narrowed
from batch.formats.lines import LineChunks
from batch.schema import TABLES
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import CLAUDE_CODE, Stream
from batch.sources.claude_code import NO_TOOL_RESULTS, ToolResults
from batch.transforms.elide import Elided
from batch.transforms.recover import OBJECT_SCHEMA, REJECT_SCHEMA, recover

FORMAT = CLAUDE_CODE
# The batch's output and work tables; those not built by the steps in `convert` are built by the
# sql/batch/<folder>/<name>.sql files, in the order their `-- reads:` headers give (sql.order).
BATCH_OUTPUTS = (*(t.name for t in TABLES if t.stage == "batch"), *WORK_SCHEMAS)
# A batch whose streams hold more bytes than this runs within DuckDB's memory limit LARGE_BATCH_MEMORY
# (--memory-mb instead, when given), beyond which its tables spill to the run folder
# (docs/decisions/007-one-large-session.md).
LARGE_BATCH_BYTES = 64 << 20
LARGE_BATCH_MEMORY = 768 << 20

# the tables each view of the converter reads (a view is read as long as they are held)
_VIEWS = {
    "records_full": ("records_core", "classified"),
    "batch_part_records": ("records_core", "classified"),
    "observation_keys": ("classified", "observation_index"),
    "batch_source_lines": ("source_lines",),
    "batch_lines": ("stage_lines",),
    "batch_rejects": ("stage_rejects",),
}

# what sql/batch/decode/observations.sql reads of each object (`batch_objects`)
_OBJECT_COLUMNS = "obj_idx, file_idx, line, sub, json"


def convert(
    con: duckdb.DuckDBPyConnection, files: list[Stream], *, tool_results: ToolResults = NO_TOOL_RESULTS,
    hasher: Executor | None = None,
    write: Callable[[str, str, Callable[[pl.DataFrame], pl.DataFrame] | None], None],
) -> Converted:
    """Convert the Claude Code streams of one batch into DuckDB relations of the output and work
    tables on `con`, each handed to `write(table, relation, restore)` as soon as no later statement
    reads it, then dropped; `restore`, when not None, puts the strings elided before the decode back
    into each frame of it (transforms/elide.py). The tables returned are none: every one is written."""
    # the batch's tables spill to the connection's temporary folder (in the run folder) beyond its memory limit
    Path(con.sql("select current_setting('temp_directory')").fetchall()[0][0]).mkdir(parents=True, exist_ok=True)
    reader = LineChunks(files, hasher)
    tool_results.register(con, "batch_tool_result_files")
    files_frame = streams.streams_frame(files)
    sql.register(con, "batch_files", files_frame.with_columns(is_foreign=pl.lit(False)))
    # a large batch runs within a memory limit, beyond which its tables spill (sql.release resets it)
    if sql.memory_limit(con) is None and sum(f.size for f in files) > LARGE_BATCH_BYTES:
        con.execute(f"set memory_limit = '{LARGE_BATCH_MEMORY >> 20} MiB'")
    # long strings are elided before the decode and restored as the tables are written
    # (transforms/elide.py); a batch converted again with its long lines rejected decodes them whole
    max_line = sql.max_line(con)
    elided = Elided() if max_line is None else None
    _load(con, reader, elided)
    _observe(con, max_line, elided)
    narrowed, files_frame = _narrow(con, reader.failed, files_frame)
    _fold(con, files_frame, narrowed.foreign, files)
    # each output table built so far, by the name of its relation
    tables = {name: name for name in ("number_faults", "source_lines", "rejects")}
    tables.update(records="records_full", parts="batch_parts", tool_calls="batch_tool_calls")
    per_file = dict(con.sql("select source_file, count(*) from batch_source_lines group by source_file").fetchall())
    _statements(con, tables, lambda table, relation: write(table, relation, _restore(elided)))
    inputs, skipped = streams.inputs(files, reader, narrowed, per_file)
    return Converted({}, inputs, skipped)


def _restore(elided: Elided | None) -> Callable[[pl.DataFrame], pl.DataFrame] | None:
    """What puts the elided strings back into a frame of a table written, None when none was elided."""
    if elided is None or not elided.rests:
        return None
    return lambda frame: next(elided.restore([frame]))


def _load(con: duckdb.DuckDBPyConnection, reader: LineChunks, elided: Elided | None) -> None:
    """Append the lines of each read slice to `stage_lines`: the one hand-over of the batch's text.
    `elided`: a line whose long strings it elides keeps its reduced text beside it (`elided`, null for
    every other line), which the decode reads."""
    rows = 0
    con.execute(
        "create temp table stage_lines (file_idx integer, line bigint, byte_offset bigint, byte_length bigint, "
        "text varchar, raw blob, utf8_ok boolean, has_newline boolean, is_blank boolean, row_order bigint, "
        "elided varchar)"
    )
    for piece in reader:
        piece = piece.with_columns(
            is_blank=streams.BLANK, row_order=pl.int_range(pl.len(), dtype=pl.Int64) + rows,
            elided=_reduced(elided, piece.get_column("text")),
        )
        rows += piece.height
        sql.register(con, "stage_piece", piece)
        con.execute("insert into stage_lines select * from stage_piece")
        con.unregister("stage_piece")
    con.execute(
        "create temp table line_counts as select file_idx, count(*) filter (not is_blank) as lines, "
        "count(*) filter (is_blank) as blank_lines from stage_lines group by file_idx"
    )


def _reduced(elided: Elided | None, texts: pl.Series) -> pl.Series:
    """The texts `elided` reduces, null where a text is kept as it is."""
    reduced = texts if elided is None else elided.reduce(texts)
    if reduced is texts:  # the common case: no text is long enough to be looked at
        return pl.repeat(None, len(texts), dtype=pl.String, eager=True)
    return pl.select(pl.when(reduced != texts).then(reduced)).to_series()


def _decode(con: duckdb.DuckDBPyConnection, objects: str, into: str, *, create: bool) -> None:
    """Decode the envelope of each object of the relation `objects` (obj_idx, file_idx, line, sub,
    json; obj_idx numbers it in read order) with sql/batch/decode/observations.sql, and classify it
    (sql/batch/decode/classify.sql), into the table `into` (created, or appended to): the observations'
    columns, the object's text as `json`, `sidechain_root` (null: the sidechain split sets it),
    `row_order` (obj_idx) and the classification. The objects that are not one JSON object are left
    out, after the decode: a filter on it would be pushed below it and parse every text twice."""
    con.execute(f"create or replace temp view batch_objects as select {_OBJECT_COLUMNS} from {objects}")
    con.execute(
        "create or replace temp view observed as "
        "select * exclude (obj_idx, is_object), null::varchar as sidechain_root, obj_idx as row_order, is_object "
        f"from ({sql.load('observations')})"
    )
    target = into if create else "stage_added"
    try:
        con.execute(f"create temp table {target} as {sql.load('classify')}")
    except duckdb.Error as exc:
        raise SqlError(f"{sql.shown('observations')} or {sql.shown('classify')} failed: {exc}") from exc
    con.execute(f"delete from {target} where not is_object")
    con.execute(f"alter table {target} drop column is_object")
    if not create:
        con.execute(f"insert into {into} select * from {target}")
        con.execute(f"drop table {target}")
    con.execute("drop view observed")
    con.execute("drop view batch_objects")


def _observe(con: duckdb.DuckDBPyConnection, max_line: int | None, elided: Elided | None) -> None:
    """Decode every non-blank line (`observations`; its reduced text where `elided` reduced it),
    recover the lines that are not one object (their objects reduced too), and gather the rejects
    (`stage_rejects`)."""
    too_long = "false" if max_line is None else f"byte_length > {int(max_line)}"
    con.execute(
        "create or replace temp view line_objects as select row_order as obj_idx, file_idx, line, null::bigint as sub, "
        f"coalesce(elided, text) as json, row_order from stage_lines where not is_blank and not ({too_long})"
    )
    _decode(con, "line_objects", "observations", create=True)
    # the lines that are not one JSON object, few: recovered in Python, line by line (`}{` lines)
    not_objects = con.sql(
        f"select file_idx, line, text, has_newline from stage_lines where not is_blank and not ({too_long}) "
        "and row_order not in (select row_order from observations) order by row_order"
    ).pl()
    con.execute("drop view line_objects")
    objects, rejects = recover(not_objects)
    if max_line is not None:
        rejects = pl.concat([rejects, streams.too_long_rejects(con.sql(
            f"select file_idx, line, byte_length from stage_lines where not is_blank and {too_long}"
        ).pl())]).sort("file_idx", "line")
    sql.register(con, "batch_rejects", rejects.cast(REJECT_SCHEMA))
    con.execute("create temp table stage_rejects as select * from batch_rejects")
    con.unregister("batch_rejects")
    if not objects.is_empty():
        if elided is not None:
            objects = objects.with_columns(json=elided.reduce(objects.get_column("json")))
        _add_objects(con, objects.cast(OBJECT_SCHEMA))
    # the observations hold the decoded lines' text now: the lines keep it where a later step reads
    # it, the rejected lines and the first line of each file (a foreign file's first bytes)
    con.execute(
        "create temp table lines_kept as select * exclude (elided) replace (case when line = 1 or (file_idx, line) in "
        "(select (file_idx, line) from stage_rejects) then text end as text) from stage_lines order by row_order"
    )
    con.execute("drop table stage_lines")
    con.execute("alter table lines_kept rename to stage_lines")


def _add_objects(con: duckdb.DuckDBPyConnection, objects: pl.DataFrame) -> None:
    """Decode and classify `objects` (OBJECT_SCHEMA) into `observations`, after its rows."""
    after = con.sql("select coalesce(max(row_order), -1) + 1 from (select row_order from observations "
                    "union all select row_order from stage_lines)").fetchall()[0][0]
    numbered = objects.with_columns(row_order=pl.int_range(pl.len(), dtype=pl.Int64) + after)
    sql.register(con, "stage_objects", numbered.with_columns(obj_idx=pl.col("row_order")))
    _decode(con, "stage_objects", "observations", create=False)
    con.unregister("stage_objects")


def _narrow(con: duckdb.DuckDBPyConnection, failed: list[int], files_frame: pl.DataFrame) -> tuple[Narrowed, pl.DataFrame]:
    """Foreign files, versions, the rebuilt subagents, the sidechain split and `ord`, then the
    statements that relate the observations."""
    if failed:  # a stream that failed to be read to its end is as if it could not be read at all
        listed = ", ".join(str(int(i)) for i in failed)
        for table in ("stage_lines", "observations", "stage_rejects", "line_counts"):
            con.execute(f"delete from {table} where file_idx in ({listed})")
    # per file, the versions its lines name, in the order they first appear
    versions = dict(con.sql(
        "select file_idx, coalesce(list(version order by first) filter (where version is not null), []) "
        "from (select file_idx, version, min(row_order) as first from observations group by all) group by file_idx"
    ).fetchall())
    blank_counts = dict(con.sql("select file_idx, blank_lines from line_counts").fetchall())
    # A file in which no line is a typed JSON object is foreign input: reported once, not per line.
    foreign = con.sql(
        "select file_idx from line_counts where lines > 1 and file_idx not in "
        "(select file_idx from observations where native_type is not null) order by file_idx"
    ).pl().get_column("file_idx")
    files_frame = files_frame.with_columns(is_foreign=pl.col("file_idx").is_in(foreign.implode()))
    if not foreign.is_empty():
        listed = ", ".join(str(int(i)) for i in foreign)
        for table in ("observations", "stage_rejects"):
            con.execute(f"delete from {table} where file_idx in ({listed})")
    sql.register(con, "batch_files", files_frame)
    files_frame = _rebuild_from_progress(con, files_frame)
    _split_sidechains(con)
    # ord: the position in the batch, by (file_rank, file_idx, line, sub; a null sub first), rows with
    # equal keys in the order they were decoded
    con.execute("alter table observations add column ord bigint")
    con.execute(
        "update observations as o set ord = k.ord from (select row_order, row_number() over "
        "(order by file_rank, file_idx, line, sub nulls first, row_order) as ord from observations) as k "
        "where o.row_order = k.row_order"
    )
    con.execute("alter table observations drop column row_order")
    con.execute("alter table observations rename to classified")
    sql.materialize(con, "observation_index")
    sql.view(con, "observation_keys")
    sql.materialize(con, "record_table")
    sql.materialize(con, "call_pairs")
    return Narrowed(foreign, versions, blank_counts), files_frame


def _rebuild_from_progress(con: duckdb.DuckDBPyConnection, files_frame: pl.DataFrame) -> pl.DataFrame:
    """Rebuild the subagent streams whose transcript is absent from their agent_progress copies, as
    virtual files (streams.virtual_files): their objects are decoded into `observations`."""
    copies = sql.frame(con, "progress_copies")
    if copies.is_empty():
        return files_frame
    files_frame, objects = streams.virtual_files(copies, files_frame)
    sql.register(con, "batch_files", files_frame)
    _add_objects(con, objects)
    return files_frame


def _split_sidechains(con: duckdb.DuckDBPyConnection) -> None:
    """Move inline 1.0.x sidechain objects into one stream per sidechain root (sql/batch/decode/sidechain_roots.sql)."""
    sql.materialize(con, "sidechain_roots")
    con.execute(
        "update observations as o set session_key = o.session_key || '/sidechain-' || r.root_uuid, "
        "stream_kind = 'sidechain', sidechain_root = r.root_uuid from sidechain_roots as r "
        "where o.file_idx = r.file_idx and o.line = r.line and o.sub is not distinct from r.sub"
    )
    con.execute("drop table sidechain_roots")


def _fold(con: duckdb.DuckDBPyConnection, files_frame: pl.DataFrame, foreign: pl.Series, files: list[Stream]) -> None:
    """number_faults, records_full with its texts, parts, source lines, rejects and tool calls over the
    whole batch, each a table of the same name."""
    con.execute(
        "create or replace temp view batch_lines as select file_idx, line, byte_offset, byte_length, text, raw, "
        "utf8_ok, has_newline from stage_lines where not is_blank"
    )
    con.execute("create or replace temp view batch_rejects as select * from stage_rejects")
    sql.materialize(con, "number_faults")
    sql.materialize(con, "records_full")  # its texts named by ord
    con.execute("alter table records_full rename to records_core")
    con.execute(
        "create temp view records_full as select r.* exclude (native_ord, tool_use_result_ord), n.json as native, "
        "t.tool_use_result from records_core as r left join classified as n on n.ord = r.native_ord "
        "left join classified as t on t.ord = r.tool_use_result_ord"
    )
    con.execute("create or replace temp view batch_part_records as select record_id from records_full")
    sql.materialize(con, "parts")
    con.execute("alter table parts rename to batch_parts")
    sql.materialize(con, "source_lines_out")
    con.execute("alter table source_lines_out rename to source_lines")
    con.execute("create or replace temp view batch_source_lines as select * from source_lines")
    # rejects: the rejected lines and each foreign file, from a few lines' text
    lines = con.sql(
        "select * exclude (is_blank, row_order) from stage_lines where not is_blank "
        "and (line = 1 or (file_idx, line) in (select (file_idx, line) from stage_rejects))"
    ).pl()
    rejects = con.table("stage_rejects").pl()
    sql.register(con, "rejects_frame", streams.rejects_out(lines, rejects, files_frame, foreign, files))
    con.execute("create temp table rejects as select * from rejects_frame")
    con.unregister("rejects_frame")
    # message.content is read by records_full and parts alone; compact summaries keep it (compactions.sql)
    con.execute("alter table classified add column summary_content varchar")
    con.execute("update classified set summary_content = content where is_compact_summary")
    con.execute("alter table classified drop column content")
    _tool_calls(con)


def _tool_calls(con: duckdb.DuckDBPyConnection) -> None:
    """sql/batch/records/tool_calls.sql with the JSON texts it names: a model call's input (its block in parts)
    and its result's toolUseResult (its record), joined in by the keys tool_calls.sql gives."""
    sql.materialize(con, "tool_calls")
    names = [n for n, in con.sql("select column_name from (describe tool_calls)").fetchall() if n != "call_part_index"]
    shown = ", ".join(
        {"input": "coalesce(c.input, p.tool_input) as input",
         "result_native": "coalesce(c.result_native, r.tool_use_result) as result_native"}.get(n, f'c."{n}"')
        for n in names
    )
    con.execute(
        "create temp table batch_tool_calls as select " + shown + " from "
        "(select *, rowid as call_row from tool_calls) as c "
        "left join batch_parts as p on p.session_key = c.session_key and p.record_id = c.call_record_id "
        "and p.part_index = c.call_part_index "
        "left join records_full as r on r.session_key = c.session_key and r.record_id = c.result_record_id "
        "order by c.call_row"
    )
    con.execute("drop table tool_calls")


def _statements(con: duckdb.DuckDBPyConnection, tables: dict[str, str], write: Callable[[str, str], None]) -> None:
    """Build the batch's output and work tables that the other sql/batch/ statements build, each
    run into a table. After each statement, the tables no later one reads are let go of: an output
    table (of `tables`, or built here) written with `write`, any other dropped."""
    sql_files = set(sql.names())
    targets = [name for name in BATCH_OUTPUTS if name not in tables and name in sql_files]
    steps = sql.order(targets, given=sql.defined(con))
    last = {}  # each table: the last step that reads it
    for i, name in enumerate(steps):
        for read in sql.reads(name):
            last.update(dict.fromkeys(_VIEWS.get(read, (read,)), i))
    held = {n for n, in con.sql("select table_name from duckdb_tables() where temporary").fetchall()}

    def let_go(done: int) -> None:
        for table, relation in list(tables.items()):
            if all(last.get(t, -1) <= done for t in _VIEWS.get(relation, (relation,))):
                write(table, tables.pop(table))
        kept = {t for relation in tables.values() for t in _VIEWS.get(relation, (relation,))}
        for name in sorted(held - kept):
            if last.get(name, -1) <= done:
                con.execute(f'drop table "{name}"')
                held.discard(name)

    # the largest statements are done (records_full's hold, sql.hold): from here the statements and
    # the writes run beside another batch's, each table let go of as soon as it can be
    sql.unhold()
    let_go(-1)
    for i, name in enumerate(steps):
        sql.materialize(con, name)
        held.add(name)
        if name in targets:
            tables[name] = name
        let_go(i)
