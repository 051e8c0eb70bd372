"""A run in three steps: plan (discover, what the previous output gives, the tasks), run the tasks on an
executor, finalize (batch/run/finalize.py); `_convert` calls them in order (docs/architecture.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from batch import reuse
from batch.errors import OutputError, SourceError
from batch.incremental import carving, deltas, history, repair, upgrade
from batch.run import executors, task
from batch.run import finalize as final
from batch.run.memory import (
    DEFAULT_BATCH_BYTES, Stop, arrow_pool, connect, default_workers, large_groups_message, largest_line,
)
from batch.schema import TABLES
from batch.schema.work import WORK_SCHEMAS
from batch.sources import registry
from batch.output import integrity
from batch.output.folder import (
    Output, fault, finish_interrupted_swap, forget_manifest, lock_output,
)
from batch.output.layout import WORK
from batch.sources.base import Unit, batches

BATCH_TABLE_NAMES = [t.name for t in TABLES if t.stage == "batch"]


@dataclass
class ConvertResult:
    """What a conversion wrote."""

    out: Path
    tables: dict[str, int]
    inputs: int
    lines: int
    rejected_lines: int
    foreign_files: int
    seconds: float
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
    executor: str = executors.LOCAL,
    full: bool = False,
    verify: bool = False,
    prune: bool = False,
    memory_bytes: int | None = None,
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
    `progress(done_bytes, total_bytes)` is called after each batch.
    """
    # refused before the lock file is made beside `out`: an output that is, holds or lies in an input
    _check_apart(registry.given_roots(sources, entire, entire_events), out)
    with lock_output(out, warn):
        return _convert(
            sources, out, entire=entire, entire_events=entire_events, all_checkpoints=all_checkpoints,
            batch_bytes=batch_bytes, workers=workers, executor=executor, full=full, verify=verify, prune=prune,
            memory=memory_bytes, progress=progress, warn=warn,
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
    carried = registry.previous_output(out) if previous is None and not options.prune else None
    fresh = options.verify or options.full
    known = previous.get("heads") if previous and not fresh else None
    known_events = previous.get("event_heads") if previous and not fresh else None
    found_all = registry.discover(
        sources, list(entire), combine=all_checkpoints, events=list(entire_events),
        known=known if isinstance(known, dict) else None,
        known_events=known_events if isinstance(known_events, dict) else None, previous=carried,
    )
    _check_apart(found_all.found.roots, out)
    if not found_all.units:
        raise SourceError(registry.nothing_found_message(sources, found_all.found, found_all.imports))
    output = Output(out)
    if output.stale_removed:
        warn(f"removed {output.stale_removed} unfinished output folder(s) of {out} left by an interrupted run.")
    stop = Stop()
    try:
        planned = _plan(output, previous, found_all, options)
        taken = _take_previous(output, planned, found_all, options, stop)
        not_converted = _run_tasks(output, planned, found_all, taken, options, stop)
        manifest = _finish(output, planned, found_all, taken, not_converted, options, read_at)
    except BaseException:
        stop.set()
        forget_manifest()  # a failed run does not keep the previous manifest it parsed
        output.abort()
        raise
    return ConvertResult(
        out=output.out,
        tables={k: manifest["tables"].get(k, 0) for k in manifest["tables"]},
        inputs=len(manifest["inputs"]),
        lines=manifest["tables"].get("source_lines", 0),
        rejected_lines=manifest["rejected_lines"],
        foreign_files=manifest["foreign_files"],
        seconds=time.perf_counter() - started,
        manifest=manifest,
    )


@dataclass
class _Planned:
    """What a run reuses of the previous output and what it converts (`_plan`)."""

    previous: dict | None
    state: dict | None  # the previous state without the groups that must be converted again
    key: str
    imports_key: str
    owners_fp: dict[str, list | None]
    plan: reuse.Plan
    splits: dict[str, list[carving.Piece] | None]  # the batches to carve, split by group
    keys: dict  # `carving.session_owners` of the previous state
    growing: dict[str, deltas.Growth]  # the grown groups to re-run as deltas
    touched: list[dict]  # the previous batches holding a growing group
    final_reused: bool  # nothing changed: the final stage is the previous run's
    previous_manifest: dict | None
    used: set[str]  # part names taken
    repair: repair.Repair  # the previous output's damaged part files, and what became of their groups
    carved: list[dict] = field(default_factory=list)
    delta_summary: dict = field(default_factory=dict)
    replaced: list[dict] = field(default_factory=list)


def _plan(output: Output, previous: dict | None, found_all: registry.Inputs, options: _Options) -> _Planned:
    """Decide what the previous output gives: batches reused as they are, carved, or holding grown
    groups to re-run as deltas, and the units to convert."""
    found, units, verify, full = found_all.found, found_all.units, options.verify, options.full
    key = reuse.run_key(found.tool_result_files)
    owners_fp = reuse.fingerprints(units)
    asked = {"key": key, "current": owners_fp, "prune": options.prune, "full": full}
    plan = reuse.plan(units, previous, **asked)
    state = previous
    # the previous output's part files that are not as its run wrote them (integrity.damaged): the
    # batches holding them are converted again, their kept groups from the output's copy of their files
    fixing = repair.Repair(output.recorded_files() if previous else {})
    fixing.damaged = integrity.damaged(output.out, fixing.recorded, verify=verify)

    def damaged(b: dict) -> bool:
        return bool(fixing.damaged & integrity.part_paths(b["part"], list(b["counts"]), b.get("work", [])))

    fixing.held = {o for b in (previous or {}).get("batches", []) if damaged(b) for o in b["groups"]}

    # a batch whose parts are no longer all there (removed by hand) or damaged is converted again
    missing = {
        owner for b in [*plan.reused, *(b for b, _ in plan.carved)]
        if output.parts(b["part"], list(b["counts"]), previous=True) != list(b["counts"])
        or output.parts(b["part"], b.get("work", []), work=True, previous=True) != b.get("work", []) or damaged(b)
        for owner in b["groups"]
    }
    if verify and plan.reused:
        missing |= history.unverified(plan, units)
    if verify:  # nothing is carved with --verify: the groups of a carved batch are converted again
        # (but for a batch holding kept groups: they cannot be converted again)
        missing |= {owner for b, _ in plan.carved if not plan.kept & b["groups"].keys() for owner in b["groups"]}
    # The batches to carve, and those holding a group re-run as a delta (`deltas.run_deltas`), are split by
    # group first (key columns only); a batch whose rows cannot all be told apart by group is
    # dropped, with every batch sharing a group with it, and their groups are converted again.
    splits: dict[str, list[carving.Piece] | None] = {}
    keys = carving.session_owners(previous)
    while True:
        if missing:
            lost = reuse.spread(previous.get("batches", []), missing) & plan.kept - fixing.rebuilt - fixing.lost
            if lost:  # kept groups: converted from the output's copy of their files, or declared lost
                copy = repair.rescue(output.out, previous["batches"], lost, fixing, verify=verify)
                if copy is not None:
                    units.extend(copy.units)
                    found_all.carried.update((u.owner, copy) for u in copy.units)
                    found_all.archives.append(copy)
                    owners_fp.update(reuse.fingerprints(copy.units))
            state = reuse.without(previous, missing)
            plan = replace(reuse.plan(units, state, **asked), complete=False)
        growing = {} if verify or full else deltas.growing_groups(
            plan, state, found, units, owners_fp, options.batch_bytes
        )
        touched = [b for b in (state or {}).get("batches", []) if growing.keys() & b["groups"].keys()]
        bad = {o for b in touched if damaged(b) for o in b["groups"]}
        for b in [*touched, *(b for b, _ in plan.carved)]:
            if b["part"] not in splits:
                splits[b["part"]] = carving.split(output, b, keys)
            if splits[b["part"]] is None:
                bad |= b["groups"].keys()
        if not bad - missing:
            break
        missing |= bad
    # nothing changed (every batch reused, the imports' run-level rows the same, the same groups'
    # sources found as in the previous run: `sessions.source_present`): the final stage and what the
    # manifest reports of it are the previous run's. The previous manifest was parsed when the output
    # was found to be ours: taken now, else not held while batches are converted.
    imports_key = registry.run_key(found_all.imports)
    final_reused = (
        plan.complete and not fixing.damaged and previous.get("imports") == imports_key
        and history.present(previous) == set(owners_fp) - found_all.carried.keys()
    )
    previous_manifest = output.previous_manifest() if final_reused else None
    forget_manifest()
    used = {b["part"] for b in [*plan.reused, *touched]} | {reuse.part_id(())}
    return _Planned(
        previous, state, key, imports_key, owners_fp, plan, splits, keys, growing, touched, final_reused,
        previous_manifest, used, fixing,
    )


def _take_previous(
    output: Output, planned: _Planned, found_all: registry.Inputs, options: _Options, stop: Stop,
) -> _Taken:
    """Take what the previous output gives into the run folder: the grown groups' deltas, the carved
    batches' rows and the reused batches' parts, each batch's state entry as recorded."""
    p, found = planned, found_all.found
    # the grown groups re-run as deltas: their new rows in batches of their own, and what of
    # their previous rows is kept or dropped, per table (`deltas.run_deltas`)
    delta_batches, dropped = [], {}
    if p.growing:
        delta_batches, dropped, p.delta_summary, whole = deltas.run_deltas(
            output, p.growing, p.touched, p.splits, found.tool_result_files, options.batch_bytes, p.used, p.owners_fp,
            stop, task.convert_batch,
        )
        p.growing = {owner: g for owner, g in p.growing.items() if owner not in whole}
    # files of the previous output whose earlier lines this run replaces (rewritten, or gone from a
    # group that is still there): named in the manifest with the lines the previous output held
    p.replaced = history.replaced(output, p.state, found, {u.owner for u in p.plan.units} - p.plan.kept, p.owners_fp)
    p.plan = replace(p.plan, units=[u for u in p.plan.units if u.owner not in p.growing])
    # the unchanged groups of a batch that also held changed ones: their rows are carved out of
    # its parts (one at a time: carving two batches at once took more CPU seconds, docs/decisions/009-carving.md)
    for old in p.touched:
        same = frozenset(o for o, fp in old["groups"].items() if reuse.unchanged(o, fp, p.owners_fp, p.plan.kept))
        carved = carving.carve(output, old, p.splits[old["part"]], same, old["part"], dropped=dropped, growing=p.growing)
        if carved is not None:
            p.carved.append(carved)
    held = {b["part"] for b in p.touched}
    for old, keep in p.plan.carved:
        if old["part"] not in held:
            part = reuse.unique_part(reuse.part_id(sorted(keep)), p.used)
            p.carved.append(carving.carve(output, old, p.splits[old["part"]], keep, part))
    taken = _Taken([], list(found.skipped))
    for batch in p.plan.reused:
        output.reuse(batch["part"], BATCH_TABLE_NAMES, list(WORK_SCHEMAS))
    # reused and carved batches are taken as recorded: their inputs, skipped paths and row counts
    # (a group's inputs are recorded by one batch, its newest, even when its rows span several)
    for batch in [*p.plan.reused, *p.carved, *delta_batches]:
        batch["inputs"] = registry.current_provenance(batch["inputs"], found_all.imports)
        taken.add(batch)
    return taken


def _run_tasks(
    output: Output, planned: _Planned, found_all: registry.Inputs, taken: _Taken, options: _Options, stop: Stop,
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

    lost = _run_batches(
        groups, sizes, output=output, tool_result_files=found_all.found.tool_result_files, used=p.used,
        executor=options.executor, workers=options.workers or default_workers(), roots=found_all.found.roots,
        batch_bytes=options.batch_bytes, stop=stop, memory=options.memory, owners_fp=p.owners_fp, taken=taken,
        converted=converted,
    )
    fault("batches")
    not_converted = [_too_large(output, units, error, p.used, taken.skipped) for units, error in lost]
    # a group converted by an earlier run keeps the rows that run wrote (`carving.keep_previous`)
    for entry in not_converted:
        for batch in carving.keep_previous(output, p.state, p.splits, p.keys, entry["session_key"], p.used):
            entry["previous_rows_kept"] = True
            taken.add(batch)
    return not_converted


def _finish(
    output: Output, planned: _Planned, found_all: registry.Inputs, taken: _Taken, not_converted: list[dict],
    options: _Options, read_at: str,
) -> dict:
    """The tables sources fill once per run, the final stage (or the previous one's, when nothing
    changed), the state, the manifest, and the swap; return the manifest."""
    p, found = planned, found_all.found
    converting = {u.owner for u in p.plan.units} | p.growing.keys()
    unconverted = {entry["session_key"] for entry in not_converted if entry.get("previous_rows_kept")}
    run_frames = registry.run_frames(found_all.imports)
    if p.repair.lost:  # declared before the final stage reads the losses
        output.write_work(final.SOURCE_LOSSES, p.repair.losses(), reuse.unique_part(reuse.part_id(["damaged"]), p.used))
    if p.previous is not None and not options.prune:
        final.keep_run_rows(output, run_frames)
    taken.count(final.write_source_parts(output, run_frames, reuse.part_id(())))
    taken.inputs.sort(key=lambda i: i["path"])
    reads = history.reads(
        p.previous, p.owners_fp, converting - unconverted, p.plan.kept, read_at,
        {o: a.last_read.get(o) for o, a in found_all.carried.items()},
    )
    taken.batches.sort(key=lambda b: b["part"])
    summary = _reuse_summary(
        p.previous, p.plan, p.carved, converting, len(taken.inputs), verify=options.verify,
        final_reused=p.final_reused, not_converted=not_converted, deltas=p.delta_summary,
    )
    if summary["final_stage"] == "reused":
        # nothing changed: the final tables and what the manifest reports of them are the previous ones
        output.reuse(f"{0:05d}", final.FINAL_TABLE_NAMES, [])
        output.reuse_catalog()  # its views and stored tables read the same files
        manifest = {
            **p.previous_manifest, "skipped": final.skipped_entries(taken.skipped), "reuse": summary, "replaced": [],
            "not_converted": [],
        }
    else:
        sources_read = final.SourceReads(reads, carving.session_owners({"batches": taken.batches}))
        with connect(spill=output.spill) as con:
            final_counts, unassigned, absent, source_losses = final.finalize(con, output, run_frames, sources_read)
        taken.counts.update(final_counts)
        manifest = final.manifest(
            found, taken.inputs, taken.skipped, taken.counts, unassigned, absent, found_all.imports, source_losses,
            summary,
        )
        manifest["kept"] = history.kept(taken.batches, reads)
        manifest["not_converted"] = not_converted
        manifest["replaced"] = p.replaced
    for key in ("carried", "damaged"):  # the previous run's, when its manifest is taken
        manifest.pop(key, None)
    if found_all.archives:
        manifest["carried"] = history.carried(found_all.archives, found_all.carried, taken.inputs, out=output.out)
    if p.repair.damaged:
        manifest["damaged"] = p.repair.manifest()
    output.write_state({
        "run_key": p.key, "imports": p.imports_key, "heads": found.heads, "event_heads": found_all.event_heads,
        "batches": taken.batches, "reads": reads,
    })
    output.commit(manifest, known={k: v for k, v in p.repair.recorded.items() if k not in p.repair.damaged})
    return manifest


def _reuse_summary(
    previous: dict | None, plan: reuse.Plan, carved_batches: list[dict], converting: set[str], inputs: int, *,
    verify: bool, final_reused: bool, not_converted: list[dict], deltas: dict,
) -> dict:
    """The manifest's `reuse`: what this run reused of the previous output, converted, kept or pruned."""
    reused_inputs = sum(len(b["inputs"]) for b in [*plan.reused, *carved_batches])
    return {
        "previous_output": previous is not None,
        "session_groups_reused": len(
            {o for b in [*plan.reused, *carved_batches] for o in b["groups"]} - converting - plan.kept
        ),
        "session_groups_converted": len(converting),
        "inputs_reused": reused_inputs,
        "inputs_converted": inputs - reused_inputs,
        "verified": bool(verify and plan.reused),
        # the imports' run-level rows (checkpoint tables, trailers) are the previous run's too
        "final_stage": "reused" if final_reused else "run",
        # groups the previous output holds whose sources this run was not given: kept, or pruned
        **({"session_groups_kept": len(plan.kept)} if plan.kept else {}),
        **({"session_groups_pruned": len(plan.pruned)} if plan.pruned else {}),
        # groups that needed more memory than the run may use: declared losses (`_too_large`)
        **({"session_groups_not_converted": len(not_converted)} if not_converted else {}),
        # grown groups re-run as deltas (only when there were some): docs/asr-tables.md, "Re-runs"
        **({"deltas": deltas} if deltas else {}),
    }


def _run_batches(
    groups: list[list[Unit]], sizes: list[int], *, output: Output, tool_result_files: set[str], used: set[str],
    executor: str, workers: int, roots: list[Path], batch_bytes: int, stop: Stop, memory: int | None,
    owners_fp: dict, taken: _Taken, converted: Callable[[int], None],
) -> list[tuple[list[Unit], str]]:
    """Convert the batches (`groups`, of `sizes` bytes) as tasks on `executor` (batch/run/executors.py)
    and take each one's state entry as it ends; return the session groups that ran out of memory
    whatever was tried, with their last error.

    Batches are independent until the final stage: each runs on its own DuckDB connection, as many at
    a time as the executor has workers; a batch larger than batch_bytes runs alone, with every CPU of
    its machine. A batch that ran out of memory is converted again a session group at a time, each
    alone; a group that still does not fit, again with its lines longer than the memory limit allows
    (`largest_line`) rejected undecoded."""
    if not groups:
        return []
    failed: list[tuple[list[Unit], str]] = []  # batches that ran out of memory
    submitted: dict[Future[task.TaskResult], list[Unit]] = {}

    def collect(finished: set[Future[task.TaskResult]]) -> None:
        for future in finished:
            result, units = future.result(), submitted.pop(future)
            if result.out_of_memory is not None:
                failed.append((units, result.out_of_memory))
                continue
            taken.add({
                "part": result.part,
                "groups": {owner: owners_fp[owner] for owner in result.owners},
                "inputs": result.inputs,
                "skipped": [list(s) for s in result.skipped],
                "counts": result.counts,
                "work": result.work,
                **({"rows": result.rows} if result.rows is not None else {}),
            })
            converted(sum(u.size for u in units))

    pool = executors.make(executor, max(1, min(workers, len(groups))), stop)
    try:
        pool.check(output.tmp, roots)

        def submit(group: list[Unit], alone: bool, max_line: int | None = None) -> Future[task.TaskResult]:
            part = reuse.unique_part(reuse.part_id([u.owner for u in group]), used)
            future = pool.submit(task.Task(
                part, tuple(group), output.tmp, frozenset(tool_result_files), 1 if alone else pool.per_machine,
                memory, max_line,
            ))
            submitted[future] = group
            return future

        running: set[Future[task.TaskResult]] = set()
        for group, size in zip(groups, sizes):
            alone = size > batch_bytes
            while running and (alone or len(running) >= pool.workers):
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                collect(finished)
            running.add(submit(group, alone))
            if alone:
                collect(wait(running).done)
                running = set()
        collect(wait(running).done)
        lost = [units for units, _ in failed if len({u.owner for u in units}) == 1]
        again = [units for units, _ in failed if len({u.owner for u in units}) > 1]
        failed.clear()
        for units in again:
            for owner in sorted({u.owner for u in units}):
                collect(wait({submit([u for u in units if u.owner == owner], True)}).done)
        lost += [units for units, _ in failed]
        failed.clear()
        for units in lost:
            collect(wait({submit(units, True, largest_line(memory))}).done)
    except BaseException:
        # a signal or a failed batch: interrupt the running tasks before waiting for them (or cancel them)
        stop.set()
        pool.close(cancel=True)
        raise
    pool.close()
    return list(failed)


@dataclass
class _Taken:
    """What the new output's batches hold, taken as each is reused, carved or converted: their
    inputs, skipped paths, row counts and state entries."""

    inputs: list[dict]
    skipped: list[tuple[str, str]]
    counts: dict[str, int] = field(default_factory=dict)
    batches: list[dict] = field(default_factory=list)

    def add(self, batch: dict) -> None:
        """Take a batch's state entry (reused and carved ones as recorded)."""
        self.inputs.extend(batch["inputs"])
        self.skipped.extend(tuple(s) for s in batch["skipped"])
        self.count(batch["counts"])
        self.batches.append(batch)

    def count(self, counts: dict[str, int]) -> None:
        for k, v in counts.items():
            self.counts[k] = self.counts.get(k, 0) + v


def _check_apart(roots: list[Path], out: Path) -> None:
    """Refuse an output folder that is an input, lies inside one, or holds one: it is replaced on every run."""
    target = out.resolve()
    for root in roots:
        if target == root:
            where = "is the input"
        elif target.is_relative_to(root):
            where = "is inside the input"
        elif root.is_relative_to(target):
            where = "contains the input"
        else:
            continue
        raise OutputError(
            f"--out {out} {where} {root}. Pass an output folder outside the inputs: it is replaced on every run."
        )


def _now() -> str:
    """This moment in UTC, as the state and the manifest write it (ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _too_large(
    output: Output, units: list[Unit], error: str, used: set[str], skipped: list[tuple[str, str]]
) -> dict:
    """Declare a session group that ran out of memory even alone: a `losses` row (category
    `memory.session_not_converted`, written as a part of `_work/source_losses`), its files in the
    manifest's `skipped`, and its entry of the manifest's `not_converted`. The group is not in the
    reuse state as converted now, so the next run tries it again (rows of it an earlier run wrote
    are kept: `carving.keep_previous`)."""
    owner = units[0].owner
    # the files by the names their fingerprints give (loading an Entire unit again would read its blobs)
    files = sorted({str(e[0]) for u in units for e in u.fingerprint or ()})
    size = sum(u.size for u in units)
    error = " ".join(error.split())[:300]
    detail = (
        f"session group of {size / (1 << 20):,.1f} MiB ({len(files)} files) needs more memory than this run may "
        f"use ({error}); convert it with a larger --memory-mb"
    )
    frame = pl.DataFrame(
        {"session_key": [owner], "category": ["memory.session_not_converted"], "detail": [detail], "count": [len(files)]},
        schema={"session_key": pl.String, "category": pl.String, "detail": pl.String, "count": pl.Int64},
    )
    output.write_work(final.SOURCE_LOSSES, frame, reuse.unique_part(reuse.part_id([owner, "not-converted"]), used))
    skipped.extend((name, "not converted: its session needs more memory than this run may use (see losses)")
                   for name in files)
    return {"session_key": owner, "bytes": size, "files": files, "error": error}


