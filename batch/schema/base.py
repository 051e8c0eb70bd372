"""Building blocks of the output schemas: columns with their documentation, tables, Markdown."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

STR = pa.string()
I64 = pa.int64()
I32 = pa.int32()
BOOL = pa.bool_()
TS = pa.timestamp("us", tz="UTC")
JSON = pa.string()  # JSON text; DuckDB reads it with the json functions
STRS = pa.list_(pa.string())


@dataclass(frozen=True)
class Col:
    name: str
    type: pa.DataType
    doc: str
    json: bool = False
    long: bool = False  # free text a value of which can be as long as a line (parts.text)


@dataclass(frozen=True)
class Table:
    name: str
    grain: str
    doc: str
    cols: tuple[Col, ...]
    # "batch": written per batch; "final": written once over all batches; "held": the output's copy of a
    # source's bytes, a part per source (run/finalize.py `write_held`)
    stage: str = "batch"

    @property
    def statistics(self) -> list[str]:
        """The columns whose Parquet statistics are written: not JSON or long text, whose min and max
        are of no use to a filter and cost the writer two copies of the longest value
        (docs/decisions/001-long-lines.md)."""
        return [c.name for c in self.cols if not (c.json or c.long)]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field(c.name, c.type, metadata={"doc": c.doc, **({"json": "1"} if c.json else {})})
                for c in self.cols
            ],
            metadata={"grain": self.grain},
        )

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.cols]


def col(name: str, type_: pa.DataType, doc: str, *, json: bool = False, long: bool = False) -> Col:
    return Col(name, type_, doc, json, long)



def markdown(tables: tuple[Table, ...]) -> str:
    """Render tables and their columns as Markdown, for docs/asr-tables.md."""
    out = []
    for t in tables:
        out.append(f"### `{t.name}`\n\nGrain: {t.grain}. {t.doc}\n")
        out.append("| column | type | meaning |\n|---|---|---|")
        for c in t.cols:
            typ = "JSON" if c.json else str(c.type).replace("large_", "")
            doc = c.doc.replace("|", "\\|")
            out.append(f"| `{c.name}` | {typ} | {doc} |")
        out.append("")
    return "\n".join(out)


DOCS_BEGIN = "<!-- generated: asr-batch schema -->"
DOCS_END = "<!-- end generated -->"


def write_docs(path: str, tables: tuple[Table, ...]) -> None:
    """Rewrite the generated table section of a Markdown file between its markers."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    head, rest = text.split(DOCS_BEGIN, 1)
    _, tail = rest.split(DOCS_END, 1)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"{head}{DOCS_BEGIN}\n{markdown(tables)}\n{DOCS_END}{tail}")
