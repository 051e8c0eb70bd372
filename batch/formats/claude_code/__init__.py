"""Claude Code JSONL: the converter of the claude-code-jsonl format (registry entry), one batch at a time.

The streams of a batch (files, or Git blobs of Entire checkpoints) are read in chunks of whole
lines; pass 1 (pass1.py) decodes each chunk alone (sql/batch/observations.sql), recovers its `}{`
lines and classifies its observations, keeping their wide frame and a narrow one (NARROW_COLUMNS).
The narrow stage (narrow.py) then finds foreign files and versions, splits inline 1.0.x sidechains,
numbers the observations (ord) and indexes them (sql/batch/observation_index.sql) from the narrow
frame; subagents whose transcript is absent are rebuilt from agent_progress copies (wide). The
record table (sql/batch/record_table.sql) relates the records from the narrow frame too, and the
observations are cut into the chunks of pass 2 (pass2.py: chunk_ends), each of which folds its
observations into records, parts and source lines. The other SQL files then run over the whole
batch (converter.py); the result is the batch's frames of the core and fact tables and of the work
tables the final stage reads. What the manifest says of the format is in report.py.

A batch larger than STORE_BYTES keeps its wide rows in a store (store.py) instead: pass 1 writes
each chunk's classified observations there and keeps the narrow frame alone, pass 2 reads each
chunk's observations back and writes its records, parts and source lines there, the other
statements read them as views over the store's files, and the large output tables are handed over
a piece at a time.
"""

from batch.formats.claude_code.converter import FORMAT, convert
from batch.formats.claude_code.report import (
    COVERAGE,
    RETENTION,
    UNASSIGNED,
    USAGE_SELECTION,
)

__all__ = ["COVERAGE", "FORMAT", "RETENTION", "UNASSIGNED", "USAGE_SELECTION", "convert"]
