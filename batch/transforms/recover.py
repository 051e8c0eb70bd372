"""Recover objects from lines that are not one JSON object, and describe the rest as rejects.

Bytes after a file's last newline that do not parse are not committed (registry entry, Position
basis: "a protocol commit boundary takes precedence over physical EOF; uncommitted bytes are not a
gap"): they get the reason UNCOMMITTED, which the pipeline keeps in source_lines only, neither as
a reject nor as a loss. A complete value after the last newline is committed (Entire writes every
full.jsonl without a final newline).

Only lines that failed the vectorized JSON check reach this module, so its per-line loop is
off the hot path (real archives: a handful of lines per hundred thousand).
"""

from __future__ import annotations

import json

import polars as pl

OBJECT_SCHEMA = {"file_idx": pl.Int32, "line": pl.Int64, "sub": pl.Int64, "json": pl.String, "reason": pl.String}
REJECT_SCHEMA = {"file_idx": pl.Int32, "line": pl.Int64, "reason": pl.String, "detail": pl.String}
UNCOMMITTED = "uncommitted"

_decoder = json.JSONDecoder()


def split_objects(text: str) -> list[str]:
    """Split text holding JSON objects back to back (`{...}{...}`) into their texts; raise ValueError otherwise."""
    out, i, n = [], 0, len(text)
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i == n:
            return out
        try:
            obj, end = _decoder.raw_decode(text, i)
        except RecursionError:
            raise ValueError("JSON nested deeper than this reader follows") from None
        if not isinstance(obj, dict):
            raise ValueError(f"a JSON {type(obj).__name__} where an object was expected")
        out.append(text[i:end])
        i = end


def recover(bad: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split bad lines into recovered objects (`line:N#k`) and rejects with a reason."""
    objects, rejects = [], []
    for row in bad.iter_rows(named=True):
        text = row["text"]
        try:
            parts = split_objects(text)
        except ValueError as exc:
            reason = "invalid_json"
            if _is_non_object(text):
                reason = "not_an_object"
            elif not row["has_newline"]:
                reason = UNCOMMITTED
            rejects.append((row["file_idx"], row["line"], reason, str(exc)[:200]))
            continue
        if len(parts) < 2:
            # One object that the strict check refused (NaN, lone surrogates): not safely readable.
            rejects.append((row["file_idx"], row["line"], "invalid_json", "accepted only by a lenient parser"))
            continue
        for k, part in enumerate(parts, start=1):
            objects.append((row["file_idx"], row["line"], k, part, "concatenated_objects"))
    return (
        pl.DataFrame(objects, schema=OBJECT_SCHEMA, orient="row"),
        pl.DataFrame(rejects, schema=REJECT_SCHEMA, orient="row"),
    )


def _is_non_object(text: str) -> bool:
    try:
        return not isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False
