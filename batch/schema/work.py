"""Intermediate tables every format writes per batch and the final stage reads across batches.

Not output tables: they live under the output's _work/, where an incremental run reads the parts
of the batches it reuses.
"""

from __future__ import annotations

import pyarrow as pa

from batch.schema.base import I64, STR
from batch.schema.core import INFERENCE_OBSERVATIONS, LOSSES, SESSIONS


def _without(schema: pa.Schema, *names: str) -> list[pa.Field]:
    return [f for f in schema if f.name not in names]


WORK_SCHEMAS: dict[str, pa.Schema] = {
    # one row per (stream, inference): sql/batch/sessions/inference_candidates.sql
    "inference_candidates": pa.schema(
        [*_without(INFERENCE_OBSERVATIONS.schema, "is_selected"), pa.field("stream_ord", I64)]
    ),
    # one row per stream of a batch, before cross-batch lineage: sql/batch/sessions/session_streams.sql
    "session_streams": pa.schema(
        _without(
            SESSIONS.schema, "parent_session_key", "root_session_key", "is_async", "first_prompt", "first_prompt_record_id",
            "source_present", "source_last_read_at",
        )
    ),
    # one row per native fact tying a stream to another: sql/batch/sessions/lineage_evidence.sql
    "lineage_evidence": pa.schema(
        [pa.field(n, STR) for n in ("child_session_key", "relation", "parent_session_key", "call_id", "role", "source")]
    ),
    # one row per count present in a form its column cannot hold: sql/batch/records/number_faults.sql
    "number_faults": pa.schema(
        [pa.field("session_key", STR), pa.field("source_file", STR), pa.field("line", I64), pa.field("position", STR),
         pa.field("field", STR), pa.field("native_value", STR)]
    ),
    # one row per stream with a prompt, its first: sql/batch/sessions/first_prompts.sql
    "first_prompts": pa.schema(
        [pa.field("session_key", STR), pa.field("record_id", STR), pa.field("seq", I64), pa.field("text", STR)]
    ),
    # one row per summary line from which no title is derived: sql/batch/sessions/unowned_summaries.sql
    "unowned_summaries": pa.schema(
        [pa.field(n, STR) for n in ("record_id", "session_key", "value", "leaf_uuid", "source_file", "position")]
    ),
    # losses found at the source (absent blobs, hash mismatches, ...), rows of the losses table
    "source_losses": LOSSES.schema,
}
