"""The batches of a run as tasks on an executor: submitted as many at a time as it has workers (a
batch larger than a batch alone), each result handed on as it ends; the batches that ran out of
memory converted again a session group at a time, and a group that does not fit even alone declared
(docs/architecture.md, "A batch out of memory")."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait

import polars as pl

from batch import reuse
from batch.incremental import carving
from batch.incremental.plan import Planned, Taken
from batch.incremental.state import Batch
from batch.output.folder import Output
from batch.run import executors, task
from batch.run.finalize import SOURCE_LOSSES
from batch.run.memory import Stop, large_groups_message, largest_line
from batch.sources import registry
from batch.sources.base import Unit, batches, fingerprint_entries, fingerprint_texts
from batch.sources.claude_code import ToolResults
from batch.sources.skipped import Skipped


def run(
    groups: list[list[Unit]], sizes: list[int], *, output: Output, tool_results: ToolResults, used: set[str],
    shared: executors.Shared, batch_bytes: int, stop: Stop, memory: int | None,
    done: Callable[[task.TaskResult, list[Unit]], None],
) -> list[tuple[list[Unit], str]]:
    """Convert the batches (`groups`, of `sizes` bytes) as tasks on the run's executor `shared`
    (batch/run/executors.py), `done(result, units)` told of each one converted as it ends; return the
    session groups that ran out of memory whatever was tried, with their last error.

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
            done(result, units)

    try:
        pool = shared.pool(len(groups))

        def submit(group: list[Unit], alone: bool, max_line: int | None = None) -> Future[task.TaskResult]:
            part = reuse.unique_part(reuse.part_id([u.owner for u in group]), used)
            future = pool.submit(task.Task(
                part, tuple(group), output.tmp, tool_results, 1 if alone else pool.per_machine,
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
        # the tasks that ran out of memory, again: their session groups alone, then with long lines rejected
        alone, lost = retries([units for units, _ in failed])
        failed.clear()
        for units in alone:
            collect(wait({submit(units, True)}).done)
        lost += [units for units, _ in failed]
        failed.clear()
        for units in lost:
            collect(wait({submit(units, True, largest_line(memory))}).done)
    except BaseException:
        # a signal or a failed batch: interrupt the running tasks before waiting for them (or cancel them)
        stop.set()
        shared.close(cancel=True)
        raise
    return list(failed)


def retries(failed: list[list[Unit]]) -> tuple[list[list[Unit]], list[list[Unit]]]:
    """What to run again, each task alone, of the batches that ran out of memory: each session group of
    a batch of several on its own; and the batches of one group, which then run with their longest
    lines rejected undecoded."""
    alone = [
        [u for u in units if u.owner == owner]
        for units in failed if len({u.owner for u in units}) > 1
        for owner in sorted({u.owner for u in units})
    ]
    return alone, [units for units in failed if len({u.owner for u in units}) == 1]


def declare_too_large(
    output: Output, units: list[Unit], error: str, used: set[str], skipped: Skipped
) -> dict:
    """Declare a session group that ran out of memory even alone: a `losses` row (category
    `memory.session_not_converted`, written as a part of `_work/source_losses`), its files in the
    manifest's `skipped`, and its entry of the manifest's `not_converted`. The group is not in the
    reuse state as converted now, so the next run tries it again (rows of it an earlier run wrote
    are kept: `carving.keep_previous`)."""
    owner = units[0].owner
    # the files by the names their fingerprints give (loading an Entire unit again would read its blobs)
    files = sorted({str(e[0]) for u in units for e in fingerprint_entries(u.fingerprint)})
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
    output.write_work(SOURCE_LOSSES, frame, reuse.unique_part(reuse.part_id([owner, "not-converted"]), used))
    skipped.extend((name, "not converted: its session needs more memory than this run may use (see losses)")
                   for name in files)
    return {"session_key": owner, "bytes": size, "files": files, "error": error}


def run_plan(
    output: Output, planned: Planned, found_all: registry.Inputs, taken: Taken, *, batch_bytes: int,
    shared: executors.Shared, memory: int | None, stop: Stop,
    progress: Callable[[int, int], None] | None, warn: Callable[[str], None] | None,
) -> list[dict]:
    """Convert the groups the plan gives as tasks (`run`), each batch taken into `taken` as it ends,
    with `progress(done_bytes, total_bytes)`; return the manifest's `not_converted`."""
    p, units = planned, found_all.units
    total = sum(u.size for u in units)
    converting = p.converting()
    done = sum(u.size for u in units if u.owner not in converting)
    if progress and done:
        progress(done, total)
    groups = [group for batch in p.plan.batches() for group in batches(batch, max_bytes=batch_bytes)]
    sizes = [sum(u.size for u in group) for group in groups]
    large = [group for group, size in zip(groups, sizes) if size > batch_bytes]
    if large and warn:
        warn(large_groups_message(large, batch_bytes, memory))

    def converted(size: int) -> None:
        nonlocal done
        done += size
        if progress:
            progress(done, total)

    def take(result: task.TaskResult, units: list[Unit]) -> None:
        owners = sorted(result.owners)
        taken.add(Batch(
            result.part, dict(zip(owners, fingerprint_texts(p.owners_fp[o] for o in owners))), result.inputs,
            tuple(tuple(s) for s in result.skipped), result.counts, tuple(result.work),
            {k: tuple(v) for k, v in result.rows.items()} if result.rows is not None else None,
        ))
        converted(sum(u.size for u in units))

    lost = run(
        groups, sizes, output=output, tool_results=found_all.tool_results, used=p.used,
        shared=shared, batch_bytes=batch_bytes, stop=stop, memory=memory, done=take,
    )
    not_converted = [declare_too_large(output, units, error, p.used, taken.skipped) for units, error in lost]
    # a group converted by an earlier run keeps the rows that run wrote (`carving.keep_previous`)
    previous = p.previous.batches if p.previous else ()
    for entry in not_converted:
        for batch in carving.keep_previous(output, p.state, p.splits, previous, entry["session_key"], p.used):
            entry["previous_rows_kept"] = True
            taken.add(batch)
    return not_converted
