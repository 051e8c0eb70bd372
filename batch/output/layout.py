"""The names of an output folder's entries, and so what may ever be replaced or removed (see
batch/output/folder.py): the table folders, `_work/`, `_spill/`, the manifest, the marker, the
reuse state, and part files."""

import re

WORK = "_work"
SPILL = "_spill"
MANIFEST = "manifest.json"
MARKER = ".asr-batch"
RUN_INFIX = ".asr-run-"
STATE = "_reuse.json"
# the state entries of the batches a run takes, spooled in its `_spill/` until the state is written
BATCHES = "batches.jsonl"
# The layout and meaning of what the reuse state and the `_work/` parts hold: a state of another
# layout is not reused (the run converts everything), so that no reused row means what it used to.
# 2: `_work/inference_candidates.stream_ord` is the record's seq; per-group row counts (`rows`).
STATE_LAYOUT = 2
# part-NNNNN: a part numbered within its run (final tables); part-<16 hex>: a batch's part, named by
# its session groups so that an incremental run can reuse it.
PART_RE = re.compile(r"^part-(\d{5}|[0-9a-f]{16})\.parquet$")
# A batch's part while it is written (`BatchFiles`): renamed to its part name once the batch is whole.
TEMPORARY_RE = re.compile(r"^\.part-[0-9a-f]{16}\.parquet\.[0-9a-f]{12}$")
