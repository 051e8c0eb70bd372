"""What a run does once its tasks are done: `settle` writes the tables sources fill once per run, the
reuse state and the manifest's inputs into the run folder, so that the run lets go of what it held
per input file; `finish` runs the final stage (batch/run/finalize.py), writes the manifest and the
catalog, and swaps the output in (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from batch import reuse
from batch.incremental import as_written, history
from batch.incremental.plan import Planned, Taken, reuse_summary
from batch.incremental.state import State
from batch.incremental.state import write as write_state
from batch.output.folder import Output
from batch.run import finalize as final
from batch.run.memory import FINAL_MEMORY, connect
from batch.sources import registry
from batch.sources.skipped import Skipped


@dataclass
class Settled:
    """What a run needs of its plan and tasks once they are done (`settle`), nothing of it per file:
    the reuse state and the manifest's inputs are in the run folder."""

    inputs: final.WrittenInputs
    skipped: Skipped
    counts: dict[str, int]
    summary: dict  # the manifest's `reuse`
    imports: list  # the Entire repositories read (`registry.Inputs.imports`)
    run_frames: dict[str, list[pl.DataFrame]]  # the tables sources fill once per run
    sources_read: final.SourceReads | None  # None when the final stage is the previous run's
    as_written: frozenset[str]  # the parts of sessions as an earlier version wrote them
    entries: dict  # the manifest's lists known before the final stage (kept, not_converted, ...)
    previous_manifest: dict | None  # the previous output's, when its final stage is reused
    known: Iterable[tuple[str, list]]  # the previous output's part files taken intact, with their size and SHA-256


def settle(
    output: Output, planned: Planned, found_all: registry.Inputs, taken: Taken, not_converted: list[dict], *,
    verify: bool, prune: bool, read_at: str,
) -> Settled:
    """The tables sources fill once per run, the reuse state and the manifest's inputs written to the
    run folder, and what the final stage and the manifest need of the rest."""
    p = planned
    converting = p.converting()
    unconverted = {entry["session_key"] for entry in not_converted if entry.get("previous_rows_kept")}
    run_frames = registry.run_frames(found_all.imports)
    if p.repair.lost:  # declared before the final stage reads the losses
        output.write_work(final.SOURCE_LOSSES, p.repair.losses(), reuse.unique_part(reuse.part_id(["damaged"]), p.used))
    if p.previous is not None and not prune:
        final.keep_run_rows(run_frames, final.run_rows(output.out))
    final.keep_run_rows(run_frames, as_written.run_rows(list(p.as_written), {i.repository for i in found_all.imports}))
    taken.count(final.write_source_parts(output, run_frames, reuse.part_id(())))
    inputs = final.WrittenInputs.write(output, (b.inputs for b in taken.batches))  # before they are sorted by part
    # each group's reads, written to the run folder a line at a time
    reads = final.SourceReads.write(output.spill, history.reads(
        p.previous, p.owners_fp, converting - unconverted, p.plan.kept, read_at,
        {**{o: a.last_read.get(o) for o, a in found_all.carried.items()}, **{g.owner: g.last_read for g in p.as_written}},
    ))
    taken.batches.sort()
    summary = reuse_summary(
        p.previous, p.plan, p.carved, converting, inputs.count, verify=verify,
        final_reused=p.final_reused, not_converted=not_converted, deltas=p.delta_summary,
    )
    reused = summary["final_stage"] == "reused"
    # (the groups not found now: kept, or rebuilt from an earlier output)
    gone = {} if reused else {owner: r[0] for owner, r in reads.items() if not r[1]}
    entries = {} if reused else {
        "kept": history.kept(taken.batches, gone), "not_converted": not_converted, "replaced": list(p.replaced),
        "as_written": as_written.manifest_entries(taken.batches),
    }
    if found_all.archives:
        entries["carried"] = history.carried(found_all.archives, found_all.carried, taken.inputs(), out=output.out)
    if p.repair.damaged:
        entries["damaged"] = p.repair.manifest()
    write_state(output.tmp, State(p.key, p.imports_key, {}, found_all.event_heads, ()),
                taken.batches.texts(), found_all.found.files.heads(), reads.items())
    return Settled(
        inputs, taken.skipped, taken.counts, summary, found_all.imports, run_frames,
        None if reused else reads.with_groups(taken.batches),
        taken.batches.parts_as_written(), entries, p.previous_manifest if reused else None,
        p.repair.intact(),
    )


def finish(output: Output, settled: Settled, *, memory: int | None, overrides: pl.DataFrame | None) -> dict:
    """The final stage (or the previous one's, when nothing changed), the manifest and the swap;
    return the manifest."""
    s = settled
    if s.previous_manifest is not None:
        # nothing changed: the final tables and what the manifest reports of them are the previous ones
        output.reuse(f"{0:05d}", final.FINAL_TABLE_NAMES, [])
        output.reuse_catalog()  # its views and stored tables read the same files
        # (the inputs are those its batches recorded, as they were then)
        manifest = {**s.previous_manifest, "inputs": s.inputs.text, "skipped": final.skipped_entries(output, s.skipped),
                    "reuse": s.summary, "replaced": [], "not_converted": []}
    else:
        # the final stage's DuckDB is closed before the catalog opens its own, under the same limit: what
        # DuckDB kept of the stage's spilled tables is let go of (decisions/017)
        with connect(spill=output.spill, memory=memory or FINAL_MEMORY) as db:
            final_counts, unassigned, absent, source_losses = final.finalize(
                db, output, s.run_frames, s.sources_read, s.as_written)
        counts = {k: s.counts.get(k, 0) + final_counts.get(k, 0) for k in s.counts.keys() | final_counts.keys()}
        manifest = final.manifest(output, s.inputs, s.skipped, counts, unassigned, absent, s.imports, source_losses, s.summary)
    for key in ("carried", "damaged"):  # the previous run's, when its manifest is taken
        manifest.pop(key, None)
    manifest.update(s.entries)
    output.commit(manifest, known=s.known, overrides=overrides, memory=memory or FINAL_MEMORY)
    return manifest
