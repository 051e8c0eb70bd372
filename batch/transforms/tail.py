"""Records without a position in their stream's transcript, ordered after it (the snapshot tail).

A format that adds records to a stream from another file (Entire lifecycle events) cannot place
them among the transcript's positions (ASR-014): it leaves `seq` null. Each such record gets the
stream's last `seq` in the batch + its rank, in (source_file, source_line) order, and the
session_events rows of those records take their seq. Units of one session share a batch
(sources/base.batches), so the last seq of the batch is the stream's.
"""

from __future__ import annotations

import polars as pl


def number(frames: dict[str, list[pl.DataFrame]]) -> None:
    """Give records (and their session_events rows) with a null seq the seq after their stream's last record."""
    records = frames.get("records", [])
    if not any(f.get_column("seq").null_count() for f in records):
        return
    # a transcript's frame (no null seq) is kept as it is, not copied
    placed = [f if not f.get_column("seq").null_count() else f.filter(pl.col("seq").is_not_null()) for f in records]
    last = pl.concat(
        [f.group_by("session_key").agg(last=pl.col("seq").max()) for f in placed if f.height]
        or [pl.DataFrame(schema={"session_key": pl.String, "last": pl.Int64})]
    ).group_by("session_key").agg(pl.col("last").max())
    tail = (
        pl.concat([f.filter(pl.col("seq").is_null()) for f in records if f.get_column("seq").null_count()],
                  how="vertical_relaxed")
        .sort("session_key", "source_file", "source_line", maintain_order=True)
        .join(last, on="session_key", how="left", maintain_order="left")
        .with_columns(
            seq=pl.col("last").fill_null(0) + pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("session_key")
        )
        .drop("last")
    )
    frames["records"] = [f for f in placed if f.height] + [tail]
    seqs = tail.select("record_id", tail_seq="seq")
    frames["session_events"] = [
        f.join(seqs, on="record_id", how="left", maintain_order="left")
        .with_columns(seq=pl.coalesce("seq", "tail_seq")).drop("tail_seq")
        if f.get_column("seq").null_count() else f
        for f in frames.get("session_events", [])
    ]
