"""The process's RSS and its peak from /proc/self/status, and a reset of the peak (Linux), for the
benchmarks that measure a step of a convert in their own process (finalize.py, batches.py)."""

from __future__ import annotations

import re


def status(key: str) -> int:
    """A VmRSS (the RSS) or VmHWM (its peak) line of /proc/self/status, in MiB."""
    with open("/proc/self/status") as fh:
        return int(re.search(key + r":\s+(\d+)", fh.read()).group(1)) >> 10


def reset_peak() -> None:
    """Make the peak (VmHWM) start again from the RSS now."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
