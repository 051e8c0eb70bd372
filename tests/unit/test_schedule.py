"""What a run converts again of the batches that ran out of memory (batch/run/schedule.py)."""

from __future__ import annotations

from batch.run.schedule import retries
from batch.sources.base import Loaded, Unit


def unit(owner: str, n: int) -> Unit:
    return Unit(owner, 10, Loaded, label=f"{owner}{n}")


def test_a_batch_of_several_groups_is_run_again_a_group_at_a_time_and_one_of_a_group_with_long_lines_rejected():
    a1, a2, b1, c1, d1, e1 = unit("A", 1), unit("A", 2), unit("B", 1), unit("C", 1), unit("D", 1), unit("E", 1)
    alone, lost = retries([[b1, a1, a2], [c1], [e1, d1]])
    assert alone == [[a1, a2], [b1], [d1], [e1]]  # by owner, within each failed batch
    assert lost == [[c1]]
    assert retries([]) == ([], [])
