"""Claude Code JSONL: the converter of the claude-code-jsonl format (registry entry), one batch at a time.

The streams of a batch (files, or Git blobs of Entire checkpoints) are read in slices of whole lines
and handed to DuckDB once (converter.py); from then on the batch is DuckDB tables: every line is
decoded once (sql/batch/decode/observations.sql) and classified (sql/batch/decode/classify.sql), foreign files,
versions, rebuilt subagents, inline sidechains and the observations' order follow, then records,
parts, source lines and tool calls, then every other statement of sql/batch/, each table written as
soon as no later statement reads it. A large batch runs within a memory limit, beyond which DuckDB
spills its tables. What Python makes beside the statements (the streams' frame, rejects, manifest
entries) is in streams.py; what the manifest says of the format is in report.py.
"""

from batch.formats.claude_code.converter import FORMAT, convert
from batch.formats.claude_code.report import (
    COVERAGE,
    RETENTION,
    UNASSIGNED,
    USAGE_SELECTION,
)

__all__ = ["COVERAGE", "FORMAT", "RETENTION", "UNASSIGNED", "USAGE_SELECTION", "convert"]
