"""The batch stage that keeps a batch's data in DuckDB, from the hand-over of its lines to its tables.

Built beside the present converter (batch/formats/claude_code/) and chosen by the internal switch
`ASR_BATCH_STAGE=duckdb` (read when a task converts a batch, batch/run/task.py), until it writes
every table row for row as the present one does; the two are compared with bench/compare.py
(docs/architecture.md, "The batch stage in DuckDB").

- claude_code.py: a batch of Claude Code streams. Its lines are read columnar (formats/lines.py) and
  appended to a DuckDB table once; every step after that is a statement over DuckDB tables
  (sql/batch/, and sql/stage/ for what the present converter does in Polars), which spill to the run
  folder under the batch's memory limit instead of growing the process.
"""

from __future__ import annotations

import os

SWITCH = "ASR_BATCH_STAGE"


def enabled() -> bool:
    """Whether batches are converted by this stage (`ASR_BATCH_STAGE=duckdb`)."""
    return os.environ.get(SWITCH) == "duckdb"
