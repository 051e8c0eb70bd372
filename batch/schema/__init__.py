"""Arrow schemas of every output table, with the documentation of each column.

The single source of truth for the output contract: the writer casts each table to its schema,
and `docs/asr-tables.md` is generated from (and tested against) these definitions.
"""

from __future__ import annotations

from batch.schema import activity, core, entire, hooks, plans, workspace
from batch.schema.base import DOCS_BEGIN, DOCS_END, Col, Table
from batch.schema.base import markdown as _markdown
from batch.schema.base import write_docs as _write_docs
from batch.schema.core import (
    INFERENCE_OBSERVATIONS,
    INFERENCES,
    LINEAGE,
    LOSSES,
    PARTS,
    RECORDS,
    REJECTS,
    SESSIONS,
    SOURCE_LINES,
    TOOL_CALLS,
)

# Core tables first, then the fact tables of each area of the registry entry, then what only Entire records,
# then the output's copy of the Git objects its Entire sessions were read from.
TABLES: tuple[Table, ...] = (
    core.TABLES + hooks.TABLES + activity.TABLES + plans.TABLES + workspace.TABLES + entire.TABLES
    + entire.HELD_TABLES
)
TABLES_BY_NAME = {t.name: t for t in TABLES}


def markdown(name: str | None = None) -> str:
    """Render every table and column as Markdown, or those of the table `name`."""
    return _markdown(TABLES if name is None else (TABLES_BY_NAME[name],))


def write_docs(path: str) -> None:
    """Rewrite the generated table section of docs/asr-tables.md."""
    _write_docs(path, TABLES)


__all__ = [
    "DOCS_BEGIN", "DOCS_END", "INFERENCES", "INFERENCE_OBSERVATIONS", "LINEAGE", "LOSSES", "PARTS",
    "RECORDS", "REJECTS", "SESSIONS", "SOURCE_LINES", "TABLES", "TABLES_BY_NAME", "TOOL_CALLS",
    "Col", "Table", "markdown", "write_docs",
]
