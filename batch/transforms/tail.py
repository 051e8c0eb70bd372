"""Records without a position in their stream's transcript, ordered after it (the snapshot tail).

A format that adds records to a stream from another file (Entire lifecycle events) cannot place
them among the transcript's positions (ASR-014): it leaves `seq` null. Each such record gets the
stream's last `seq` in the batch + its rank, in (source_file, source_line) order, and the
session_events rows of those records take their seq; they are written after the batch's other
rows of their tables. Units of one session share a batch (sources/base.batches), so the last seq of
the batch is the stream's.
"""

from __future__ import annotations

import polars as pl


class Tail:
    """Numbers the records with a null seq (and their session_events rows) as a batch's tables pass
    on their way to their parts: the rows with a seq go on at once, the others are held until every
    record of the batch has passed (`rest`), when each stream's last seq is known."""

    def __init__(self) -> None:
        self._last: list[pl.DataFrame] = []  # each stream's largest seq in a piece of records
        self._records: list[pl.DataFrame] = []  # records without a seq
        self._events: list[pl.DataFrame] = []  # session_events pieces with a row without a seq

    def pass_on(self, name: str, frame: pl.DataFrame) -> pl.DataFrame | None:
        """The rows of a piece of table `name` to write now (None: none); the others are held."""
        if name == "records":
            if not frame.get_column("seq").null_count():  # a transcript's piece goes on as it is, not copied
                placed = frame
            else:
                placed = frame.filter(pl.col("seq").is_not_null())
                self._records.append(frame.filter(pl.col("seq").is_null()))
            if placed.height:
                self._last.append(placed.group_by("session_key").agg(last=pl.col("seq").max()))
            return placed
        if name == "session_events" and frame.get_column("seq").null_count():
            self._events.append(frame)
            return None
        return frame

    def placed(self, last: pl.DataFrame) -> None:
        """Each stream's largest seq (session_key, last) in records written without passing here."""
        if last.height:
            self._last.append(last)

    def rest(self) -> dict[str, pl.DataFrame]:
        """The rows held, numbered: each record without a seq gets its stream's last seq + its rank,
        in (source_file, source_line) order; its session_events rows take that seq."""
        held: dict[str, pl.DataFrame] = {}
        if self._records:
            last = pl.concat(
                self._last or [pl.DataFrame(schema={"session_key": pl.String, "last": pl.Int64})]
            ).group_by("session_key").agg(pl.col("last").max())
            held["records"] = (
                pl.concat(self._records, how="vertical_relaxed")
                .sort("session_key", "source_file", "source_line", maintain_order=True)
                .join(last, on="session_key", how="left", maintain_order="left")
                .with_columns(
                    seq=pl.col("last").fill_null(0) + pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("session_key")
                )
                .drop("last")
            )
        if self._events:
            events = pl.concat(self._events, how="vertical_relaxed")
            if "records" in held:
                seqs = held["records"].select("record_id", tail_seq="seq")
                events = (
                    events.join(seqs, on="record_id", how="left", maintain_order="left")
                    .with_columns(seq=pl.coalesce("seq", "tail_seq")).drop("tail_seq")
                )
            held["session_events"] = events
        self._last, self._records, self._events = [], [], []
        return held
