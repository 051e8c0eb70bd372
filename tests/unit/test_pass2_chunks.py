"""The chunks of pass 2 (claude_code.pass2.chunk_ends): contiguous ranges of ord, cut between lines only and
never inside a record's span of live observations."""

from __future__ import annotations

import polars as pl

from batch.formats.claude_code.pass2 import chunk_ends

# ten observations of 10 bytes each: ords 3 and 4 are two objects recovered from one line (file 0,
# line 3); a record's live observations span ords 5 to 9 (across lines and files, as a message.id
# fold might), the other records are one observation each
OBSERVATIONS = pl.DataFrame(
    {
        "ord": list(range(1, 11)),
        "file_idx": [0, 0, 0, 0, 0, 0, 0, 1, 1, 1],
        "line": [1, 2, 3, 3, 4, 5, 6, 1, 2, 3],
        "json_bytes": [10] * 10,
    },
    schema={"ord": pl.Int64, "file_idx": pl.Int32, "line": pl.Int64, "json_bytes": pl.UInt32},
)
SPANS = pl.DataFrame(
    {"first": [1, 2, 3, 4, 5, 10], "last": [1, 2, 3, 4, 9, 10]}, schema={"first": pl.Int64, "last": pl.Int64}
)


def chunk_of(ends: pl.Series) -> pl.Series:
    return ends.search_sorted(OBSERVATIONS.get_column("ord"), side="left")


def test_cuts_keep_lines_and_live_spans_whole():
    ends = chunk_ends(OBSERVATIONS, SPANS, 20)
    # 20 bytes: ords 1-2; then 3-4 (a cut after ord 3 would split line 3); ords 5-9 extend their chunk
    # to 50 bytes (the record's live span, no allowed cut within the target); then ord 10
    assert ends.to_list() == [2, 4, 9, 10]
    chunks = OBSERVATIONS.with_columns(chunk=chunk_of(ends))
    # no line's objects are split, no record's live span is cut
    assert chunks.group_by("file_idx", "line").agg(pl.col("chunk").n_unique()).get_column("chunk").max() == 1
    for first, last in SPANS.iter_rows():
        assert chunks.get_column("chunk")[first - 1] == chunks.get_column("chunk")[last - 1]
    # the record longer than the target made its chunk longer than the target
    sizes = chunks.group_by("chunk").agg(pl.col("json_bytes").sum()).sort("chunk").get_column("json_bytes")
    assert sizes.to_list() == [20, 20, 50, 10]


def test_a_target_between_two_objects_of_a_line_cuts_before_the_line():
    # 30 bytes would end after ord 3, inside line 3: the chunk ends after ord 2
    assert chunk_ends(OBSERVATIONS, SPANS, 30).to_list() == [2, 4, 9, 10]
    # 40 bytes end after line 3; then the live span 5-9 (50 bytes) again extends its chunk
    assert chunk_ends(OBSERVATIONS, SPANS, 40).to_list() == [4, 9, 10]
    # 60 bytes: the first allowed cut within is after ord 4 (ords 5-8 are inside the span)
    assert chunk_ends(OBSERVATIONS, SPANS, 60).to_list() == [4, 10]


def test_rows_in_any_order_and_the_extremes():
    shuffled = OBSERVATIONS.sample(fraction=1.0, shuffle=True, seed=7)
    assert chunk_ends(shuffled, SPANS, 20).to_list() == [2, 4, 9, 10]
    assert chunk_ends(OBSERVATIONS, SPANS, 1 << 26).to_list() == [10]  # one chunk
    # the smallest target: every allowed cut
    assert chunk_ends(OBSERVATIONS, SPANS, 1).to_list() == [1, 2, 4, 9, 10]
    assert chunk_ends(OBSERVATIONS.clear(), SPANS.clear(), 20).to_list() == [0]
