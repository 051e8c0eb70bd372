"""The paths a run looked at and did not convert, with why (the manifest's `skipped`): written to
files of the run folder as they are found, in sorted runs of `RUN` entries, and merged when the
manifest is written, so that the process that plans a run holds none of them per path (an archive's
persisted tool results are as many as its transcripts or more; docs/performance.md, "A cluster run,
on paper").
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path

RUN = 16384  # entries held, then sorted and written as a run


class Skipped:
    """(path, reason) entries, appended as found and read back sorted; `folder()` gives the folder
    of the run files (called when the first run is written)."""

    def __init__(self, folder: Callable[[], Path]) -> None:
        self._folder = folder
        self._pending: list[tuple[str, str]] = []
        self._runs: list[Path] = []
        self._count = 0

    def append(self, entry: tuple[str, str] | list[str]) -> None:
        path, reason = entry
        self._pending.append((path, reason))
        self._count += 1
        if len(self._pending) >= RUN:
            self._write_run()

    def extend(self, entries: Iterable[tuple[str, str] | list[str]]) -> None:
        for entry in entries:
            self.append(entry)

    def __iadd__(self, entries: Iterable[tuple[str, str] | list[str]]) -> Skipped:
        self.extend(entries)
        return self

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """The entries sorted by path, then reason (a line of each run read at a time)."""
        with ExitStack() as stack:
            runs = [map(_entry, stack.enter_context(path.open(encoding="utf-8"))) for path in self._runs]
            yield from heapq.merge(*runs, sorted(self._pending))

    def _write_run(self) -> None:
        path = self._folder() / f"skipped-{len(self._runs):05d}.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(entry) + "\n" for entry in sorted(self._pending))
        self._runs.append(path)
        self._pending = []


def _entry(line: str) -> tuple[str, str]:
    path, reason = json.loads(line)
    return path, reason
