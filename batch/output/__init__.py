"""What a run writes: Parquet parts (parts.py), the output and run folders with the swap (folder.py),
the DuckDB catalog (catalog.py), and the names of their entries (layout.py)."""
