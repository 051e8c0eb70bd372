"""A run in three steps: plan (discover, what the previous output gives, the tasks: batch/incremental/),
run the tasks on an executor (batch/run/schedule.py), finalize (batch/run/finish.py); `_convert` calls
them in order (docs/architecture.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from batch.errors import SourceError
from batch.incremental import plan as incremental
from batch.incremental import upgrade
from batch.output import manifest as manifest_file
from batch.output.folder import Output, check_apart, finish_interrupted_swap, lock_output
from batch.output.layout import MANIFEST, WORK
from batch.output.prices import read_prices
from batch.run import finalize as final
from batch.run import executors, finish, schedule
from batch.run.executors import LOCAL
from batch.run.memory import DEFAULT_BATCH_BYTES, Stop, arrow_pool
from batch.sources import registry


@dataclass
class ConvertResult:
    """What a conversion wrote."""

    out: Path
    tables: dict[str, int]
    inputs: int  # files read
    input_bytes: int
    lines: int
    rejected_lines: int
    foreign_files: int
    seconds: float
    # manifest.json, its values that grow with the archive (`inputs`, `skipped`, `_meta`, `files`, `export_report`) as
    # spans of the file (batch/output/manifest.py `Span.parse`)
    manifest: dict = field(repr=False)


def convert(
    sources: list[Path],
    out: Path,
    *,
    entire: list[Path] | tuple[Path, ...] = (),
    entire_events: list[Path] | tuple[Path, ...] = (),
    all_checkpoints: bool = False,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    workers: int | None = None,
    executor: str = LOCAL,
    full: bool = False,
    verify: bool = False,
    prune: bool = False,
    memory_bytes: int | None = None,
    prices: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> ConvertResult:
    """Convert Claude Code transcripts and Entire checkpoints under `sources` into ASR Parquet tables in `out`.

    A source that is a Git repository (working tree root, bare repository, mirror), and every path of
    `entire`, is read as Entire checkpoints: by default the newest checkpoint of each session, every
    checkpoint with `all_checkpoints`. Any other source is read as Claude Code transcript files. Every path of
    `entire_events` is a JSONL file (or a folder of them) of Entire agent-protocol lifecycle events.
    `workers` batches are converted at once (default: `default_workers()`); memory grows with
    `workers * batch_bytes`. `executor` runs them: `local` (threads of this process), `dask` (a Dask
    LocalCluster of `workers` processes) or a Dask scheduler's address (tcp://HOST:PORT), whose
    workers must see the inputs and `out` under the same paths. A session group (a main transcript
    with its subagents) is never split: one larger than `batch_bytes` is a batch of its own, converted while no other batch
    runs, and `warn(message)` is told about it before the conversion starts.
    Over a previous output, the session groups whose files kept their size and modification time
    are reused (their parts, or their rows carved out of a batch they shared with a changed group)
    and only the others converted (`batch/reuse.py`); `verify` also compares their
    SHA-256, `full` converts everything. The result is the same as a full conversion's.
    The session groups of the previous output that `sources` no longer provide (files deleted,
    folders moved away, inputs not given this time) are kept as they are, and `sessions` says
    their source is gone; `prune` drops them instead. Only one run writes `out` at a time: a
    second one waits for the first (`warn` says so).
    The catalog prices the responses at genai-prices' list prices, with the rows of data/pricing.csv
    and then of the price file `prices` (laid out the same) on top (batch/output/prices.py).
    `progress(done_bytes, total_bytes)` is called after each batch.
    """
    # refused before the lock file is made beside `out`: an output that is, holds or lies in an input
    check_apart(registry.given_roots(sources, entire, entire_events), out)
    overrides = None if prices is None else read_prices(prices)  # a bad file is refused before any work
    with lock_output(out, warn):
        return _convert(
            sources, out, entire=entire, entire_events=entire_events, all_checkpoints=all_checkpoints,
            batch_bytes=batch_bytes, workers=workers, executor=executor, full=full, verify=verify, prune=prune,
            memory=memory_bytes, overrides=overrides, progress=progress, warn=warn,
        )


@dataclass
class _Options:
    """What the caller asked of the run (`convert`'s keywords)."""

    batch_bytes: int
    workers: int | None
    executor: str
    full: bool
    verify: bool
    prune: bool
    memory: int | None
    overrides: pl.DataFrame | None
    progress: Callable[[int, int], None] | None
    warn: Callable[[str], None] | None


def _convert(
    sources: list[Path], out: Path, *, entire, entire_events, all_checkpoints: bool, **asked,
) -> ConvertResult:
    """Plan (what the inputs are, what the previous output gives), run the tasks, finalize."""
    started, read_at, options = time.perf_counter(), _now(), _Options(**asked)
    arrow_pool()
    warn = options.warn or (lambda message: None)
    # a run killed between the two renames of its swap left no `out`: its output becomes `out` again
    finished = finish_interrupted_swap(out)
    if finished is not None:
        warn(f"{out} was missing: the output of a run interrupted while it replaced it ({finished.name}) is {out} again.")
    # the previous output's reuse state, read before discovery: it knows the heads of unchanged files
    # (and, even with --full, which groups the output holds: those no input provides are kept).
    # An output written before a work table was added gets it from its own parts first: else its
    # state is another version's, and it is read as a source instead (below).
    registry.check_readable(out)  # an output of a newer version is refused, untouched
    previous, derived = upgrade.read_upgraded_state(out)
    if derived:
        warn(f"{out} was written before {', '.join(f'{WORK}/{n}' for n in derived)} existed: derived from its parts.")
    # an output whose state this version cannot read (another version's) is read as a source: the
    # groups no input gives any more are converted from its copy of their files (sources/archive.py)
    carried = out if previous is None and not options.prune else None
    fresh = options.verify or options.full
    # (the heads of the previous discovery, read from the state file as discovery spools them)
    known = previous.heads.items() if previous and not fresh else None
    known_events = dict(previous.event_heads) if previous and not fresh else None
    output = Output(out)  # its run folder holds the files discovery finds
    if output.stale_removed:
        warn(f"removed {output.stale_removed} unfinished output folder(s) of {out} left by an interrupted run.")
    stop, held, shared = Stop(), None, None
    try:
        found_all = registry.discover(
            sources, list(entire), combine=all_checkpoints, events=list(entire_events),
            known=known, known_events=known_events, previous=carried, folder=output.spill,
        )
        check_apart(found_all.found.roots, out)
        if not found_all.units:
            raise SourceError(registry.nothing_found_message(sources, found_all.found, found_all.imports))
        planned = incremental.plan(
            output, previous, found_all, verify=options.verify, full=options.full, prune=options.prune,
            batch_bytes=options.batch_bytes,
        )
        # one executor for the run's tasks: the grown groups' deltas, then the batches
        shared = executors.Shared(options.executor, options.workers, stop, output.tmp, found_all.found.roots)
        planned, taken = incremental.take_previous(output, planned, found_all, batch_bytes=options.batch_bytes, shared=shared)
        held = final.HeldCopy(output, found_all.imports, keep=planned.previous is not None and not options.prune,
                              damaged=planned.repair.damaged, stop=stop)  # beside the tasks
        not_converted = schedule.run_plan(
            output, planned, found_all, taken, batch_bytes=options.batch_bytes, shared=shared, memory=options.memory,
            stop=stop, progress=options.progress, warn=options.warn,
        )
        shared.close()
        taken.count(held.counts())
        settled = finish.settle(output, planned, found_all, taken, not_converted, verify=options.verify,
                                prune=options.prune, read_at=read_at)
        # what the run held per file is in the run folder now (the reuse state, the manifest's inputs):
        # let go of it, so that the final stage runs beside counts and per-group frames alone
        del previous, known, known_events, found_all, planned, taken
        manifest = finish.finish(output, settled, memory=options.memory, overrides=options.overrides)
    except BaseException:
        stop.set()
        if shared is not None:
            shared.close(cancel=True)
        if held is not None:
            held.wait()
        output.abort()
        raise
    # as written, its lists that grow with the archive left unparsed, as spans of the file
    manifest = manifest_file.read(output.out / MANIFEST, keep=manifest_file.GROWING)
    return ConvertResult(
        out=output.out,
        tables={k: manifest["tables"].get(k, 0) for k in manifest["tables"]},
        inputs=settled.inputs.count,
        input_bytes=settled.inputs.size,
        lines=manifest["tables"].get("source_lines", 0),
        rejected_lines=manifest["rejected_lines"],
        foreign_files=manifest["foreign_files"],
        seconds=time.perf_counter() - started,
        manifest=manifest,
    )


def _now() -> str:
    """This moment in UTC, as the state and the manifest write it (ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
