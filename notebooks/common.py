"""What every notebook starts with: the output folder, the catalog and where charts go.

The output folder is `-- --out DIR` after the notebook's name, else $ASR_OUT, else out/; charts
are saved as PNG files into `-- --charts DIR` (or $ASR_CHARTS) when one is given.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from batch.output.catalog import open_catalog


def open_output(args: dict) -> tuple[Path, duckdb.DuckDBPyConnection, Path | None]:
    """Return the output folder, its catalog opened read-only, and the charts folder (or None)."""
    out = Path(args.get("out") or os.environ.get("ASR_OUT", "out"))
    charts = args.get("charts") or os.environ.get("ASR_CHARTS")
    return out, open_catalog(out), Path(charts) if charts else None


def save(fig, charts: Path | None, name: str):
    """Save a chart as <charts>/<name>.png when a charts folder is given; return the figure."""
    if charts is not None:
        charts.mkdir(parents=True, exist_ok=True)
        fig.savefig(charts / f"{name}.png", dpi=100, bbox_inches="tight")
        print(f"  saved {charts / name}.png")
    return fig
