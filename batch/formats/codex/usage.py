"""Usage of Codex rollouts: token_usage_record lines where a file has them, else the token_count rule.

Since about 0.151 Codex writes a `token_usage_record` line per model response, completed or ended
incomplete with usage (reference codex-format.md §14.4): the response's `usage` under the Responses
API's `response_id`. Where a file has such lines, each distinct `response_id` is one inference, its ID
the `response_id` itself, as the Claude Code entry takes the provider's response ID (`message.id`) for
the inference ID; a response whose record two files hold (a child that repeats its parent's record, a
second copy of a file) is one inference, selected once across the output (sql/final/inference_ranks.sql).
The running sums (`turn_token_usage`, `thread_token_usage`) and a `compacted` line's
`latest_token_usage_record` (an embedded copy) are never counted.

The §9.6 rule (one response per distinct pair of cumulative and last usage of token_count events,
sql/batch/codex/codex_lines.sql) keeps counting the files without records, and the part of a file written
before its records began (a file Codex resumed after an upgrade): the lines before the turn of its
first record. The token_count lines from that turn on repeat the records' usage: they stay records of
the stream (source_lines mapped) and give no inference.
"""

from __future__ import annotations

import polars as pl

from batch.formats.codex.classify import USAGE_RECORD_KIND
from batch.formats.codex.tables import usage_columns
from batch.schema.work import WORK_SCHEMAS

USAGE_SOURCE = "token_usage_record"  # inferences.usage_source of a response read from a record


def select(every: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """The classified lines with the usage each one gives: `records` (codex_usage_records.sql) joined
    by line; `is_response` kept only for token_counts written before their file's records began;
    `record_response` for a record that reports usage; `inference_id` the line's inference, if any."""
    frame = every.join(records, on=["file_idx", "line"], how="left", maintain_order="left")
    is_usage_record = (pl.col("line_type") == "token_usage_record") & pl.col("ok") & pl.col("response_id").is_not_null()
    first = (
        frame.filter(is_usage_record).group_by("file_idx")
        .agg(_first_record=pl.col("line").min(), _first_turn=pl.col("record_turn_id").sort_by("line").first())
    )
    frame = frame.join(first, on="file_idx", how="left", maintain_order="left")
    # records began with the turn of the first record: its first line, else the record's own line
    began = frame.filter(
        (pl.col("turn") == pl.col("_first_turn")) & (pl.col("line") <= pl.col("_first_record"))
    ).group_by("file_idx").agg(_began=pl.col("line").min())
    frame = frame.join(began, on="file_idx", how="left", maintain_order="left").with_columns(
        _began=pl.coalesce("_began", "_first_record")
    )
    # an all-zero usage is no report, as a token_count placeholder is not (§9.6)
    reported = ~((pl.col("record_input") == 0) & (pl.col("record_output") == 0)).fill_null(True)
    frame = frame.with_columns(
        is_response=pl.col("is_response") & (pl.col("_began").is_null() | (pl.col("line") < pl.col("_began"))),
        record_response=(pl.col("kind") == USAGE_RECORD_KIND) & is_usage_record & reported,
    )
    return frame.with_columns(
        inference_id=pl.when(pl.col("record_response")).then("response_id")
        .when(pl.col("is_response")).then("usage_id"),
    ).drop("_first_record", "_first_turn", "_began")


def record_candidates(every: pl.DataFrame) -> pl.DataFrame:
    """One row per (stream, response_id): the first record of each response in its stream (by the
    rollout order of the thread's files, then position). `usage` maps as token_count's last usage
    does: input includes cached input (and cache writes), output includes reasoning."""
    frame = every.filter(pl.col("is_record") & pl.col("record_response")).sort("session_key", "rollout_order", "line")
    counts = frame.group_by("session_key", "response_id").len("line_count")
    frame = frame.unique(["session_key", "response_id"], keep="first", maintain_order=True).join(
        counts, on=["session_key", "response_id"], how="left", maintain_order="left"
    ).select(inference_id="response_id", **usage_columns("record"), usage_source=pl.lit(USAGE_SOURCE))
    return _shaped(frame)


def candidates(by_pair: pl.DataFrame, by_record: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """inference_candidates of a batch: the token_count responses (`by_pair`) and the records'; one row
    per (stream, inference), the first in its stream (a thread's two rollouts may repeat a pair).
    `stream_ord` is the record's seq, which orders a thread's rollouts and each one's lines."""
    seq = records.select("record_id", _seq="seq")
    return _shaped(
        pl.concat([by_pair, by_record]).join(seq, on="record_id", how="left", maintain_order="left")
        .with_columns(stream_ord="_seq").sort("session_key", "stream_ord")
        .unique(["session_key", "inference_id"], keep="first", maintain_order=True)
    )


def _shaped(frame: pl.DataFrame) -> pl.DataFrame:
    target = pl.from_arrow(WORK_SCHEMAS["inference_candidates"].empty_table())
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in target.schema.items() if name not in frame.columns]
    return frame.with_columns(missing).select(target.columns).cast(target.schema)
