"""A run in three steps: plan (discover, what the previous output gives, the tasks), run the tasks on an
executor, finalize (batch/run/finalize.py); `_convert` calls them in order (docs/architecture.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from batch import reuse
from batch.errors import SourceError
from batch.incremental import as_written, carving, history, upgrade
from batch.incremental import plan as incremental
from batch.incremental.state import Batch, State
from batch.incremental.state import write as write_state
from batch.output.folder import Output, check_apart, finish_interrupted_swap, lock_output
from batch.output import manifest as manifest_file
from batch.output.layout import MANIFEST, WORK
from batch.output.prices import read_prices
from batch.run import finalize as final
from batch.run import schedule, task
from batch.run.memory import DEFAULT_BATCH_BYTES, FINAL_MEMORY, Stop, arrow_pool, connect, default_workers, large_groups_message
from batch.run.executors import LOCAL
from batch.sources import registry
from batch.sources.base import Unit, batches


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
    # manifest.json, its lists that grow with the archive (`inputs`, `_meta`, `files`) as spans of the
    # file (batch/output/manifest.py `Span.parse`)
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
    known = dict(previous.heads) if previous and not fresh else None
    known_events = dict(previous.event_heads) if previous and not fresh else None
    found_all = registry.discover(
        sources, list(entire), combine=all_checkpoints, events=list(entire_events),
        known=known, known_events=known_events, previous=carried,
    )
    check_apart(found_all.found.roots, out)
    if not found_all.units:
        raise SourceError(registry.nothing_found_message(sources, found_all.found, found_all.imports))
    output = Output(out)
    if output.stale_removed:
        warn(f"removed {output.stale_removed} unfinished output folder(s) of {out} left by an interrupted run.")
    stop, held = Stop(), None
    try:
        planned = incremental.plan(
            output, previous, found_all, verify=options.verify, full=options.full, prune=options.prune,
            batch_bytes=options.batch_bytes,
        )
        planned, taken = incremental.take_previous(output, planned, found_all, batch_bytes=options.batch_bytes, stop=stop)
        held = final.HeldCopy(output, found_all.imports, keep=planned.previous is not None and not options.prune,
                              damaged=planned.repair.damaged, stop=stop)  # beside the tasks
        not_converted = _run_tasks(output, planned, found_all, taken, options, stop)
        taken.count(held.counts())
        settled = _settle(output, planned, found_all, taken, not_converted, options, read_at)
        # what the run held per file is in the run folder now (the reuse state, the manifest's inputs):
        # let go of it, so that the final stage runs beside counts and per-group frames alone
        del previous, known, known_events, found_all, planned, taken
        manifest = _finish(output, settled, options)
    except BaseException:
        stop.set()
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


def _run_tasks(
    output: Output, planned: incremental.Planned, found_all: registry.Inputs, taken: incremental.Taken, options: _Options, stop: Stop,
) -> list[dict]:
    """Convert the groups the plan gives as tasks, with progress; return the manifest's `not_converted`."""
    p, units = planned, found_all.units
    total = sum(u.size for u in units)
    converting = {u.owner for u in p.plan.units} | p.growing.keys()
    done = sum(u.size for u in units if u.owner not in converting)
    if options.progress and done:
        options.progress(done, total)
    groups = [group for batch in p.plan.batches() for group in batches(batch, max_bytes=options.batch_bytes)]
    sizes = [sum(u.size for u in group) for group in groups]
    large = [group for group, size in zip(groups, sizes) if size > options.batch_bytes]
    if large and options.warn:
        options.warn(large_groups_message(large, options.batch_bytes, options.memory))

    def converted(size: int) -> None:
        nonlocal done
        done += size
        if options.progress:
            options.progress(done, total)

    def take(result: task.TaskResult, units: list[Unit]) -> None:
        taken.add(Batch(
            result.part, {owner: p.owners_fp[owner] for owner in sorted(result.owners)}, tuple(result.inputs),
            tuple(tuple(s) for s in result.skipped), result.counts, tuple(result.work),
            {k: tuple(v) for k, v in result.rows.items()} if result.rows is not None else None,
        ))
        converted(sum(u.size for u in units))

    lost = schedule.run(
        groups, sizes, output=output, tool_result_files=found_all.found.tool_result_files, used=p.used,
        executor=options.executor, workers=options.workers or default_workers(), roots=found_all.found.roots,
        batch_bytes=options.batch_bytes, stop=stop, memory=options.memory, done=take,
    )
    not_converted = [schedule.declare_too_large(output, units, error, p.used, taken.skipped) for units, error in lost]
    # a group converted by an earlier run keeps the rows that run wrote (`carving.keep_previous`)
    for entry in not_converted:
        for batch in carving.keep_previous(output, p.state, p.splits, p.keys, entry["session_key"], p.used):
            entry["previous_rows_kept"] = True
            taken.add(batch)
    return not_converted


@dataclass
class _Settled:
    """What a run needs of its plan and tasks once they are done (`_settle`), nothing of it per file:
    the reuse state and the manifest's inputs are in the run folder."""

    inputs: final.WrittenInputs
    skipped: list[tuple[str, str]]
    counts: dict[str, int]
    summary: dict  # the manifest's `reuse`
    imports: list  # the Entire repositories read (`registry.Inputs.imports`)
    run_frames: dict[str, list[pl.DataFrame]]  # the tables sources fill once per run
    sources_read: final.SourceReads | None  # None when the final stage is the previous run's
    as_written: frozenset[str]  # the parts of sessions as an earlier version wrote them
    entries: dict  # the manifest's lists known before the final stage (kept, not_converted, ...)
    previous_manifest: dict | None  # the previous output's, when its final stage is reused
    known: dict[str, list]  # the previous output's part files taken intact, with their size and SHA-256


def _settle(
    output: Output, planned: incremental.Planned, found_all: registry.Inputs, taken: incremental.Taken, not_converted: list[dict],
    options: _Options, read_at: str,
) -> _Settled:
    """The tables sources fill once per run, the reuse state and the manifest's inputs written to the
    run folder, and what the final stage and the manifest need of the rest."""
    p = planned
    converting = {u.owner for u in p.plan.units} | p.growing.keys()
    unconverted = {entry["session_key"] for entry in not_converted if entry.get("previous_rows_kept")}
    run_frames = registry.run_frames(found_all.imports)
    if p.repair.lost:  # declared before the final stage reads the losses
        output.write_work(final.SOURCE_LOSSES, p.repair.losses(), reuse.unique_part(reuse.part_id(["damaged"]), p.used))
    if p.previous is not None and not options.prune:
        final.keep_run_rows(run_frames, final.run_rows(output.out))
    final.keep_run_rows(run_frames, as_written.run_rows(list(p.as_written), {i.repository for i in found_all.imports}))
    taken.count(final.write_source_parts(output, run_frames, reuse.part_id(())))
    inputs = final.WrittenInputs.write(output, [b.inputs for b in taken.batches])  # before they are sorted by part
    reads = history.reads(
        p.previous, p.owners_fp, converting - unconverted, p.plan.kept, read_at,
        {**{o: a.last_read.get(o) for o, a in found_all.carried.items()}, **{g.owner: g.last_read for g in p.as_written}},
    )
    taken.batches.sort(key=lambda b: b.part)
    summary = incremental.reuse_summary(
        p.previous, p.plan, p.carved, converting, inputs.count, verify=options.verify,
        final_reused=p.final_reused, not_converted=not_converted, deltas=p.delta_summary,
    )
    reused = summary["final_stage"] == "reused"
    entries = {} if reused else {
        "kept": history.kept(taken.batches, reads), "not_converted": not_converted, "replaced": list(p.replaced),
        "as_written": as_written.manifest_entries(taken.batches),
    }
    if found_all.archives:
        entries["carried"] = history.carried(found_all.archives, found_all.carried, taken.inputs(), out=output.out)
    if p.repair.damaged:
        entries["damaged"] = p.repair.manifest()
    write_state(output.tmp, State(p.key, p.imports_key, found_all.found.heads, found_all.event_heads, tuple(taken.batches), reads))
    return _Settled(
        inputs, taken.skipped, taken.counts, summary, found_all.imports, run_frames,
        None if reused else final.SourceReads.of(reads, carving.session_owners(taken.batches)),
        frozenset(b.part for b in taken.batches if b.written_by), entries, p.previous_manifest if reused else None,
        {k: v for k, v in p.repair.recorded.items() if k not in p.repair.damaged},
    )


def _finish(output: Output, settled: _Settled, options: _Options) -> dict:
    """The final stage (or the previous one's, when nothing changed), the manifest and the swap;
    return the manifest."""
    s = settled
    with ExitStack() as stack:
        db = None
        if s.previous_manifest is not None:
            # nothing changed: the final tables and what the manifest reports of them are the previous ones
            output.reuse(f"{0:05d}", final.FINAL_TABLE_NAMES, [])
            output.reuse_catalog()  # its views and stored tables read the same files
            # (the inputs are those its batches recorded, as they were then)
            manifest = {**s.previous_manifest, "inputs": s.inputs.text, "skipped": final.skipped_entries(s.skipped),
                        "reuse": s.summary, "replaced": [], "not_converted": []}
        else:
            # one DuckDB for the final stage and the catalog after it: one memory limit for both (decisions/017)
            db = stack.enter_context(connect(spill=output.spill, memory=options.memory or FINAL_MEMORY))
            final_counts, unassigned, absent, source_losses = final.finalize(
                db, output, s.run_frames, s.sources_read, s.as_written)
            counts = {k: s.counts.get(k, 0) + final_counts.get(k, 0) for k in s.counts.keys() | final_counts.keys()}
            manifest = final.manifest(s.inputs, s.skipped, counts, unassigned, absent, s.imports, source_losses, s.summary)
        for key in ("carried", "damaged"):  # the previous run's, when its manifest is taken
            manifest.pop(key, None)
        manifest.update(s.entries)
        output.commit(manifest, known=s.known, overrides=options.overrides, db=db)
    return manifest


def _now() -> str:
    """This moment in UTC, as the state and the manifest write it (ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
