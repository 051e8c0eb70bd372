"""Runs of consecutive rows by the bytes they hold: the slices a frame is written in
(output/parts.py), so that the write's working memory is a slice's."""

from __future__ import annotations

import polars as pl


def ranges(sizes: pl.Series, size: int) -> list[tuple[int, int]]:
    """The [start, end) ranges of consecutive rows whose `sizes` add up to about `size` each (a row
    larger than `size` is a range of its own at the most): one range over every row, none included,
    when they hold less."""
    ends = sizes.cum_sum()
    bounds = pl.int_range(1, (ends.max() or 0) // size + 1, eager=True) * size
    starts = sorted({0, *(i for i in ends.search_sorted(bounds, side="right").to_list() if i < len(sizes))})
    return list(zip(starts, [*starts[1:], len(sizes)]))
