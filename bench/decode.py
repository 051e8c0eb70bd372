"""The envelope decode against one decode of the envelope and message.content's blocks, on one batch.

    python bench/decode.py ARCHIVE [--size-mb 48] [--repeat 7]

Reads the first SIZE MiB of lines of the archive's .jsonl files (path order, whole lines, blank lines
left out) into one table, as one batch of the converter holds them, and times on one DuckDB thread
(CPU seconds, best of REPEAT, each result fetched as Arrow):
- `json_valid`, a parse that builds nothing;
- the envelope as sql/batch/decode/observations.sql decodes it (`message.content` written back as JSON text);
- that envelope plus the content's blocks decoded again from that text, as sql/batch/records/parts.sql does;
- the envelope with `message.content`'s blocks typed in the same `json_transform` (the fields of a
  block parts.sql reads), one parse for both.
The envelope's type is read from observations.sql and the block's from parts.sql, so the figures
follow the converter's own decode (docs/performance.md, "What half the CPU seconds would take").
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from batch import sql

CONTENT_FIELD = '"content": "JSON",\n                "usage": "JSON"'


def lines_of(archive: Path, size: int) -> list[str]:
    """Whole non-blank lines of the archive's .jsonl files, in path order, up to `size` bytes."""
    taken: list[str] = []
    total = 0
    for path in sorted(archive.rglob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            if not raw.strip():
                continue
            taken.append(raw.decode("utf-8", errors="replace"))
            total += len(raw)
            if total >= size:
                return taken
    return taken


def quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def statements() -> dict[str, str]:
    """The four decodes, by label, over a table `objects(json)`."""
    envelope = re.search(r"try\(json_transform\(o\.json, '(\{.*?\})'\)\) as e", sql.load("observations"), re.S)
    block = re.search(r"json_transform\(block, '(\{.*?\})'\) as b", sql.load("parts"), re.S)
    if envelope is None or block is None or CONTENT_FIELD not in envelope.group(1):
        raise SystemExit("observations.sql or parts.sql no longer decodes as this benchmark reads them; update it")
    today, block = envelope.group(1), block.group(1)
    typed = today.replace(CONTENT_FIELD, f'"content": [{block}],\n                "usage": "JSON"')
    return {
        "json_valid": "select json_valid(json) from objects",
        "envelope as observations.sql decodes it": f"select try(json_transform(json, {quoted(today)})) as e from objects",
        "that envelope + the blocks decoded from its content's text": (
            f"with d as (select try(json_transform(json, {quoted(today)})) as e from objects) "
            f"select e, [try(json_transform(b, {quoted(block)})) for b in json_extract(e.message.content, '$[*]')] "
            "as blocks from d"
        ),
        "the envelope with the content's blocks typed, one parse": (
            f"select try(json_transform(json, {quoted(typed)})) as e from objects"
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--size-mb", type=int, default=48)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    lines = lines_of(args.archive, args.size_mb << 20)
    con = duckdb.connect()
    con.execute("set threads = 1")
    con.register("objects", pa.table({"json": pa.array(lines, pa.string())}))
    print(f"{len(lines):,} lines, {sum(map(len, lines)) / 1e6:.1f} MB; CPU seconds, best of {args.repeat}, one thread")
    for label, text in statements().items():
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            result = con.sql(text).to_arrow_table()
            best = min(best, time.process_time() - start)
        print(f"{best:7.3f}  {label}  ({result.nbytes / 1e6:.0f} MB as Arrow)")


if __name__ == "__main__":
    main()
