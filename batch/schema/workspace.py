"""Workspace, version control, file changes, checkpoints and usage summaries.

Each table here is built per batch by sql/<table name>.sql (see batch/pipeline.py).
"""

from __future__ import annotations

from batch.schema.base import Table

TABLES: tuple[Table, ...] = ()
