"""Incremental runs: what of a previous output is reused, carved out, kept, or re-run as a delta."""
