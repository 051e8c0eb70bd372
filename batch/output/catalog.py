"""The DuckDB catalog of an output folder: OUT/asr.duckdb, a view per table and per sql/views/ file.

The catalog is written into the run's temporary folder before the swap. Each table view reads
`<root>/<table>/*.parquet`, where root is the variable `asr_root` when it is set, else the
absolute path of the output at its final place (so `duckdb OUT/asr.duckdb` works from any
working directory). While building, `asr_root` is the temporary folder: every view binds against
the new files, and a later query of a missing folder fails loudly instead of returning an empty
table. `open_catalog` sets `asr_root` to where the folder is now, so a moved or copied output
still answers; the duckdb CLI follows a move after `asr-batch catalog OUT` (`refresh_catalog`).

The catalog also holds `model_prices` for the cost views, so it never reads a file outside the
output folder: the dated prices of the models of `inferences`, built when the catalog is written
from the genai-prices data installed, then data/pricing.csv and a `--prices` file on top
(batch/output/prices.py), its `checked_on` the day it is built. It stores the sql/views/ files
marked `-- materialized: table` as tables, computed once from the new files: rewrite the catalog
(`asr-batch catalog OUT`) after changing the prices or upgrading genai-prices.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from batch.errors import BatchError, OutputError
from batch.output import manifest as manifest_file
from batch.output.layout import SPILL
from batch.output.prices import SCHEMA as PRICE_SCHEMA
from batch.output.prices import model_prices, pricing_csv, read_prices
from batch.schema import TABLES
from batch.sql import quote, sql_dir, within_limit

CATALOG = "asr.duckdb"
MANIFEST = "manifest.json"
ROOT = "asr_root"
PRICES = "model_prices"
OUTPUT_PATH = "asr_output_path"
# the time zone of the local days of the day views (usage_by_day, cache_hit_ratio) and of asr-batch
# report: UTC when unset; LOCAL_DAY(ts) is a timestamp's day there
TIMEZONE = "asr_timezone"
LOCAL_DAY = "asr_local_day"
# DuckDB's memory limit while the catalog is written (decisions/017-final-stage-in-duckdb.md)
CATALOG_MEMORY = 256 << 20
# The catalog is written in the oldest storage format that holds what it uses, so that every
# DuckDB since 1.0 opens it, the 1.x command line included (decisions/016-catalog-storage.md).
STORAGE_VERSION = "v1.0.0"
_READS = re.compile(r"^--\s*reads:\s*(.*)$", re.MULTILINE)
# A view file whose header says `-- materialized: table` is stored as a table: the output never
# changes after the swap, and the views that read it answer in a fraction of the time.
_MATERIALIZED = re.compile(r"^--\s*materialized:\s*table\s*$", re.MULTILINE)


def view_files() -> dict[str, str]:
    """Return name -> SQL of every sql/views/ file, in an order where each view follows what it reads."""
    folder = sql_dir() / "views"
    texts = {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.sql"))}
    reads = {}
    for name, text in texts.items():
        match = _READS.search(text)
        if match is None:
            raise BatchError(f"sql/views/{name}.sql: no `-- reads:` header; name the relations it reads.")
        reads[name] = [r.strip() for r in match.group(1).split(",") if r.strip()]
    ordered: dict[str, str] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in ordered:
            return
        if name in path:
            raise BatchError(f"sql/views/{name}.sql: reads itself through {' -> '.join(path)}.")
        for dep in reads[name]:
            if dep in texts:
                visit(dep, (*path, name))
        ordered[name] = texts[name]

    for name in texts:
        visit(name, ())
    return ordered


def view_doc(text: str) -> str:
    """The documentation of a sql/views/ file: its header comment, the `-- reads:` line and
    directives left out."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        body = line[2:].strip()
        if not re.match(r"(reads|materialized):", body):
            lines.append(body)
    return " ".join(lines)


def views_markdown(name: str | None = None) -> str:
    """Every view with its grain as a Markdown table, or one view's documentation and columns."""
    docs = {n: view_doc(text).removeprefix(f"{n}: ") for n, text in view_files().items()}
    if name is None:
        rows = [f"| `{n}` | {doc.split('. ')[0].rstrip('.')} |" for n, doc in sorted(docs.items())]
        return "\n".join(["### Views", "", "| view | grain |", "|---|---|", *rows, ""])
    columns = view_columns()[name]
    rows = [f"| `{c}` | {ty} |" for c, ty in columns]
    return "\n".join([f"### `{name}` (view)", "", docs[name], "", "| column | type |", "|---|---|", *rows, ""])


def view_columns() -> dict[str, list[tuple[str, str]]]:
    """Each view's columns (name, DuckDB type), bound over empty tables of the output's schemas."""
    with duckdb.connect() as con:
        for stmt in _macros(Path("/")):
            con.execute(stmt)
        for t in TABLES:
            con.register(f"_{t.name}", pa.table({f.name: pa.array([], f.type) for f in t.schema}))
            con.execute(f"create view {t.name} as select * from _{t.name}")
        con.register(PRICES, pl.DataFrame(schema=PRICE_SCHEMA))
        for name, text in view_files().items():
            con.execute(f"create view {name} as\n{text}")
        columns = {}
        for name in view_files():
            rel = con.sql(f"select * from {name}")
            columns[name] = [(c, str(ty)) for c, ty in zip(rel.columns, rel.types)]
        return columns


def _macros(out: Path) -> list[str]:
    """The macros the views call: where the output is, and a timestamp's local day."""
    return [
        f"create or replace macro {OUTPUT_PATH}() as {quote(str(out))}",
        f"create or replace macro {LOCAL_DAY}(ts) as "
        f"cast(timezone(coalesce(getvariable('{TIMEZONE}'), 'UTC'), ts) as date)",
    ]


def table_view_sql(out: Path) -> list[str]:
    """Return the statements exposing every table of the output folder `out` by name, and the
    macros the views call."""
    return [
        *_macros(out),
        *(
            f"create or replace view {t.name} as select * from read_parquet("
            f"coalesce(getvariable('{ROOT}'), {OUTPUT_PATH}()) || '/{t.name}/*.parquet')"
            for t in TABLES
        ),
    ]


def _write_prices(con: duckdb.DuckDBPyConnection, overrides: pl.DataFrame | None) -> None:
    """Store `model_prices` for the models of the output's inferences, each with the agent of its stream."""
    models = con.sql(
        "select distinct i.model, s.agent from inferences as i left join sessions as s using (session_key) "
        "where i.model is not null"
    ).fetchall()
    layers = [read_prices(pricing_csv()), *([] if overrides is None else [overrides])]
    frame = model_prices(models, overrides=layers, checked_on=datetime.now(UTC).date())
    con.register("model_prices_built", frame)
    con.execute(f"create or replace table {PRICES} as select * from model_prices_built")
    con.unregister("model_prices_built")


def write_catalog(
    folder: Path, out: Path, *, overrides: pl.DataFrame | None = None, memory: int | None = None,
) -> None:
    """Write `folder`/asr.duckdb with views over the tables as they will stand in `out`.

    The tables must already be in `folder`: the views are bound against them. `overrides`: the
    rows of a price file (`read_prices`), over those of genai-prices and data/pricing.csv. `memory`:
    DuckDB's limit while the stored views are computed (CATALOG_MEMORY by default).
    """
    path = folder / CATALOG
    partial = folder / f".{CATALOG}.partial"
    partial.unlink(missing_ok=True)
    try:
        # the stored views (inference_costs: a row per response) are computed within a memory limit,
        # spilling into the output's _spill/ beyond it, as the final stage does (decisions/017)
        with duckdb.connect(config={"memory_limit": f"{(memory or CATALOG_MEMORY) >> 20}MiB",
                                    "temp_directory": str(folder / SPILL)}) as con:
            con.execute("set enable_progress_bar = false")  # (the CLI draws its own)
            con.execute(f"attach {quote(str(partial))} as catalog (storage_version '{STORAGE_VERSION}')")
            con.execute("use catalog")
            con.execute(f"set variable {ROOT} = $root", {"root": str(folder.resolve())})
            for stmt in table_view_sql(out):
                con.execute(stmt)
            _write_prices(con, overrides)
            for name, text in view_files().items():
                kind = "table" if _MATERIALIZED.search(text) else "view"
                try:
                    within_limit(con, lambda: con.execute(f"create or replace {kind} {name} as\n{text}"))
                except duckdb.Error as exc:
                    raise BatchError(f"sql/views/{name}.sql failed: {exc}") from exc
            con.execute("use memory")
            con.execute("detach catalog")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(folder / SPILL, ignore_errors=True)  # (DuckDB spilled there)


def built_root(con: duckdb.DuckDBPyConnection) -> str | None:
    """Return the output path a catalog's views read when `asr_root` is not set."""
    try:
        return con.sql(f"select {OUTPUT_PATH}()").fetchall()[0][0]
    except duckdb.Error:
        return None


def _check_output(out: Path) -> Path:
    """Return the resolved folder when it holds an asr-batch manifest; else raise."""
    try:  # its format alone: a large output's manifest is tens of MB (batch/output/manifest.py)
        data = manifest_file.read_keys(out / MANIFEST, ("format",))
    except (OSError, ValueError):
        data = None
    fmt = data.get("format") if isinstance(data, dict) else None
    if not isinstance(fmt, dict) or fmt.get("name") != "asr":
        raise BatchError(f"{out}: no asr-batch {MANIFEST} here. Pass a folder written by `asr-batch convert`.")
    return out.resolve()


def refresh_catalog(out: Path, *, prices: Path | None = None) -> Path:
    """Rewrite OUT/asr.duckdb for where the output folder is now (after a move or copy), with the
    prices of the installed genai-prices, data/pricing.csv and the price file `prices` on top."""
    overrides = None if prices is None else read_prices(prices)
    root = _check_output(out)
    missing = [t.name for t in TABLES if not (root / t.name).is_dir()]
    if missing:
        raise OutputError(f"{out}: table folders missing ({', '.join(missing)}). Convert again into this folder.")
    try:
        write_catalog(root, root, overrides=overrides)
    except OSError as exc:
        raise OutputError(f"{out}: cannot write {CATALOG} ({exc.strerror}). Check the folder's permissions.") from exc
    return root / CATALOG


def open_catalog(out: Path) -> duckdb.DuckDBPyConnection:
    """Open OUT/asr.duckdb read-only, so that queries read the output and nothing else.

    The connection cannot write the catalog (read-only), reads files only inside the output
    folder (enable_external_access off, allowed_directories the folder), loads no extension,
    keeps its temporary files in a folder of its own outside the output, and cannot change
    these settings (lock_configuration). Statements that write files inside the folder (COPY,
    EXPORT) pass those settings: `batch.query.split` refuses them.
    """
    root = _check_output(out)
    if not (root / CATALOG).is_file():
        raise BatchError(f"{out}: no {CATALOG} here. Rebuild it with `asr-batch catalog {out}`.")
    # Spilled rows go to a folder of their own outside the output; DuckDB creates it only when
    # it spills and removes it on close.
    spill = Path(tempfile.gettempdir()) / f"asr-sql-{uuid.uuid4().hex[:12]}"
    try:
        con = duckdb.connect(
            str(root / CATALOG),
            read_only=True,
            config={"autoinstall_known_extensions": False, "autoload_known_extensions": False},
        )
    except duckdb.Error as exc:
        raise BatchError(f"{out}: {CATALOG} cannot be opened ({exc}). Rebuild it with `asr-batch catalog {out}`.") from exc
    con.execute("set temp_directory = $dir", {"dir": str(spill)})
    con.execute("set allowed_directories = $dirs", {"dirs": [str(root) + os.sep]})
    con.execute("set enable_external_access = false")
    con.execute("set allow_persistent_secrets = false")
    con.execute("set enable_progress_bar = false")
    con.execute("set lock_configuration = true")
    con.execute(f"set variable {ROOT} = $root", {"root": str(root)})
    return con
