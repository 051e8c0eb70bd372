"""What a run takes from the previous output: the plan (which batches are reused as they are,
carved, or re-run as deltas; which groups are converted, kept, rebuilt from the output's copy or
lost), then the previous batches taken into the run folder (docs/architecture.md, "Incremental re-runs")."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from batch import reuse
from batch.incremental import as_written, carving, deltas, history, repair
from batch.incremental.state import Batch, BatchLog, State
from batch.output import integrity
from batch.output.folder import Output
from batch.output.layout import BATCHES
from batch.schema import TABLES
from batch.schema.work import WORK_SCHEMAS
from batch.sources import archive, registry
from batch.sources.base import fingerprint_entries, fingerprint_texts
from batch.sources.skipped import Skipped

if TYPE_CHECKING:
    from batch.run.executors import Shared

# the tables a batch may have parts of (named by its groups)
PART_TABLE_NAMES = [t.name for t in TABLES if t.stage in ("batch", "final")]


@dataclass(frozen=True)
class Planned:
    """What a run reuses of the previous output and what it converts (`plan`, then `take_previous`)."""

    previous: State | None
    state: State | None  # the previous state without the groups that must be converted again
    key: str
    imports_key: str
    owners_fp: dict[str, str | None]
    plan: reuse.Plan
    splits: dict[str, list[carving.Piece] | None]  # the batches to carve, split by group
    growing: dict[str, deltas.Growth]  # the grown groups to re-run as deltas
    touched: list[Batch]  # the previous batches holding a growing group
    final_reused: bool  # nothing changed: the final stage is the previous run's
    previous_manifest: dict | None
    used: set[str]  # part names taken
    repair: repair.Repair  # the previous output's damaged part files, and what became of their groups
    # the groups earlier outputs hold without their bytes and no input gives, carried as they were written
    as_written: tuple[as_written.Group, ...] = ()
    carved: tuple[Batch, ...] = ()  # set by `take_previous`, as the next three
    delta_summary: dict = field(default_factory=dict)
    replaced: tuple[dict, ...] = ()

    def converting(self) -> set[str]:
        """The groups this run converts: the units to convert and the grown groups re-run as deltas."""
        return {u.owner for u in self.plan.units} | self.growing.keys()


def carry_gone_files(
    output: Output, previous: State, found_all: registry.Inputs, current: dict[str, str | None], damaged: set[str],
) -> bool:
    """Add to `found_all.units` the files of the groups they give at the same place that the previous
    output read and no input gives any more (a subagent's transcript deleted while its session's is
    there), as units of their groups rebuilt from the output's copy of them (sources/archive.py, but
    from its `damaged` part files): converted with their group, their rows stay; a group no other input
    gives (a session only such a file names) is carried, its source not present. `current`: the units'
    fingerprints; True when units were added."""
    def files(fp: str | None) -> set[str]:
        # a group's files by name (a file's entry: name, size, time, sidecar; a file rebuilt from the
        # copy: name, size, SHA-256), not the Git objects of Entire sessions, which their repository or its copy gives
        return {e[0] for e in fingerprint_entries(fp) if len(e) in (3, 4)}

    # the groups given now that read files before which they do not name now (each with whether it
    # still names one of its files of before)
    candidates = {}
    for o, fp in previous.owners().items():
        if o in current and current[o] != fp:  # (the same fingerprint names the same files)
            paths, now = files(fp), {e[0] for e in fingerprint_entries(current[o])}
            if paths - now:
                candidates[o] = paths, bool(paths & now)
    names = reuse.given(current, set().union(*(paths for paths, _ in candidates.values())))
    # files no input gives now, of a group given at the same place (some of its files by the same names:
    # not an archive moved or copied under another name, all of whose files are given again under new names)
    gone = set().union(*(paths - names for paths, here in candidates.values() if here or paths & names))
    if not gone:
        return False
    before = {o: files(fp) for o, fp in previous.owners().items()}
    # every group those files are of (a file of events names several sessions, some no file gives now)
    copy = archive.discover(output.out, owners={o for o, paths in before.items() if paths & gone}, paths=gone,
                            damaged=damaged)
    found_all.units.extend(copy.units)
    found_all.carried.update((u.owner, copy) for u in copy.units if u.owner not in current)
    return bool(copy.units)


def plan(
    output: Output, previous: State | None, found_all: registry.Inputs, *, verify: bool, full: bool, prune: bool,
    batch_bytes: int,
) -> Planned:
    """Decide what the previous output gives: batches reused as they are, carved, or holding grown
    groups to re-run as deltas, and the units to convert."""
    found, units = found_all.found, found_all.units
    key = found_all.tool_results.key
    # (before an output's copy is read to repair damaged parts below: its groups are all given)
    frozen = () if prune else tuple(as_written.find(found_all, set(previous.owners()) if previous else set()))
    # the previous output's part files that are not as its run wrote them (integrity.damaged): the
    # batches holding them are converted again, their kept groups from the output's copy of their files
    fixing = repair.Repair(output.recorded_files() if previous else None)
    fixing.damaged = integrity.damaged(output.out, fixing.recorded or (), verify=verify)
    if previous is not None:  # a group unchanged since the previous run: its owner's text is the state's, its
        # fingerprint the state's (told from the state file when asked: `StoredFingerprint`), compared as text
        before = {o: (o, fp) for b in previous.batches for o, fp in b.groups.items()}
        ours = [unit for unit in units if unit.owner in before]
        now = fingerprint_texts(u.fingerprint for u in ours)
        for unit, text, stored in zip(ours, now, fingerprint_texts(before[u.owner][1] for u in ours)):
            if text == stored:
                unit.owner, unit.fingerprint = before[unit.owner]
        del before
    owners_fp = reuse.fingerprints(units)
    if previous is not None and not prune and carry_gone_files(output, previous, found_all, owners_fp, fixing.damaged):
        owners_fp = reuse.fingerprints(units)
    asked = {"key": key, "current": owners_fp, "prune": prune, "full": full}
    planned = reuse.plan(units, previous, **asked)
    state = previous

    def damaged(b: Batch) -> bool:
        return bool(fixing.damaged & integrity.part_paths(b.part, list(b.counts), list(b.work)))

    fixing.held = {o for b in previous.batches if damaged(b) for o in b.groups} if previous else set()

    # a batch whose parts are no longer all there (removed by hand) or damaged is converted again
    missing = {
        owner for b in [*planned.reused, *(b for b, _ in planned.carved)]
        if output.parts(b.part, list(b.counts), previous=True) != list(b.counts)
        or output.parts(b.part, list(b.work), work=True, previous=True) != list(b.work) or damaged(b)
        for owner in b.groups
    }
    if verify and planned.reused:
        missing |= history.unverified(planned, units)
    if verify:  # nothing is carved with --verify: the groups of a carved batch are converted again
        # (but for a batch holding kept groups: they cannot be converted again)
        missing |= {owner for b, _ in planned.carved if not planned.kept & b.groups.keys() for owner in b.groups}
    # The batches to carve, and those holding a group re-run as a delta (`deltas.run_deltas`), are split by
    # group first (key columns only); a batch whose rows cannot all be told apart by group is
    # dropped, with every batch sharing a group with it, and their groups are converted again.
    splits: dict[str, list[carving.Piece] | None] = {}
    while True:
        if missing:
            lost = reuse.spread(previous.batches, missing) & planned.kept - fixing.rebuilt - fixing.lost
            if lost:  # kept groups: converted from the output's copy of their files, or declared lost
                copy = repair.rescue(output.out, previous.batches, lost, fixing, verify=verify)
                if copy is not None:
                    units.extend(copy.units)
                    found_all.carried.update((u.owner, copy) for u in copy.units)
                    found_all.archives.append(copy)
                    owners_fp.update(reuse.fingerprints(copy.units))
            state = reuse.without(previous, missing)
            planned = replace(reuse.plan(units, state, **asked), complete=False)
        growing = {} if verify or full else deltas.growing_groups(
            planned, state, found, units, owners_fp, batch_bytes
        )
        touched = [b for b in (state.batches if state else ()) if growing.keys() & b.groups.keys()]
        bad = {o for b in touched if damaged(b) for o in b.groups}
        to_split = {b.part: b for b in [*touched, *(b for b, _ in planned.carved)] if b.part not in splits}.values()
        # (the group of each session of their groups, among the previous state's inputs)
        keys = carving.session_owners(previous.batches, {o for b in to_split for o in b.groups}) if to_split else {}
        for b in to_split:
            splits[b.part] = carving.split(output, b, keys)
        for b in [*touched, *(b for b, _ in planned.carved)]:
            if splits[b.part] is None:
                bad |= b.groups.keys()
        if not bad - missing:
            break
        missing |= bad
    # nothing changed (every batch reused, the imports' run-level rows the same, the same groups'
    # sources found as in the previous run: `sessions.source_present`): the final stage and what the
    # manifest reports of it are the previous run's (its lists that grow with the archive left in its
    # file, batch/output/manifest.py).
    imports_key = registry.run_key(found_all.imports)
    final_reused = (
        planned.complete and not fixing.damaged and previous.imports == imports_key
        and history.found_the_same(previous, set(owners_fp) - found_all.carried.keys())
    )
    previous_manifest = output.previous_manifest() if final_reused else None
    used = {b.part for b in [*planned.reused, *touched]} | {reuse.part_id(())}
    return Planned(
        previous, state, key, imports_key, owners_fp, planned, splits, growing, touched, final_reused,
        previous_manifest, used, fixing, frozen,
    )


def take_previous(
    output: Output, p: Planned, found_all: registry.Inputs, *, batch_bytes: int, shared: Shared,
) -> tuple[Planned, Taken]:
    """Take what the previous output gives into the run folder: the grown groups' deltas (run as
    tasks on the run's executor `shared`, batch/run/executors.py), the carved batches' rows and the
    reused batches' parts, each batch's state entry as recorded; return the plan with what this
    changed of it (the deltas, the carved batches, the replaced files)."""
    found = found_all.found
    # the grown groups re-run as deltas: their new rows in batches of their own, and what of
    # their previous rows is kept or dropped, per table (`deltas.run_deltas`)
    delta_batches, dropped, delta_summary, growing = [], {}, {}, p.growing
    if growing:
        delta_batches, dropped, delta_summary, whole = deltas.run_deltas(
            growing, p.touched, p.splits, found_all.tool_results, batch_bytes, p.used, shared,
            output.tmp, len(p.plan.units),
        )
        growing = {owner: g for owner, g in growing.items() if owner not in whole}
    # files of the previous output whose earlier lines this run replaces (rewritten, or gone from a
    # group that is still there): named in the manifest with the lines the previous output held
    replaced = history.replaced(
        output, p.state, found.files, {u.owner for u in p.plan.units} - p.plan.kept, p.owners_fp,
    )
    planned = replace(p.plan, units=[u for u in p.plan.units if u.owner not in growing])
    # the unchanged groups of a batch that also held changed ones: their rows are carved out of its
    # parts, by tasks on the run's executor (one at a time: carving two batches at once took more CPU
    # seconds, docs/decisions/009-carving.md)
    fps = {owner: g.fp for owner, g in growing.items()}
    carvings = [
        carving.CarveTask(
            old, p.splits[old.part], frozenset(o for o, fp in old.groups.items()
                                               if reuse.unchanged(o, fp, p.owners_fp, planned.kept)),
            old.part, output.tmp, output.out, dropped, {o: fp for o, fp in fps.items() if o in old.groups},
        ) for old in p.touched
    ]
    held = {b.part for b in p.touched}
    carvings += [
        carving.CarveTask(old, p.splits[old.part], keep, reuse.unique_part(reuse.part_id(sorted(keep)), p.used),
                          output.tmp, output.out)
        for old, keep in planned.carved if old.part not in held
    ]
    if carvings:
        shared.pool(len(carvings) + len(planned.units))
    carved = [entry for entry in map(shared.run_alone, carvings) if entry is not None]
    taken = Taken(found.skipped, BatchLog(output.spill / BATCHES))
    for batch in planned.reused:  # (the parts of the final tables too: those of groups as written)
        output.reuse(batch.part, PART_TABLE_NAMES, list(WORK_SCHEMAS))
    for batch in as_written.write(output, list(p.as_written), p.used):
        taken.add(batch)
    # reused and carved batches are taken as recorded: their inputs, skipped paths and row counts
    # (a group's inputs are recorded by one batch, its newest, even when its rows span several)
    for batch in [*planned.reused, *carved, *delta_batches]:
        taken.add(batch.with_inputs(registry.current_provenance(list(batch.inputs), found_all.imports)))
    return replace(
        p, plan=planned, growing=growing, carved=tuple(carved), delta_summary=delta_summary, replaced=tuple(replaced),
    ), taken


@dataclass
class Taken:
    """What the new output's batches hold, taken as each is reused, carved or converted: their
    state entries (with their inputs, spooled to the run folder), skipped paths and row counts."""

    skipped: Skipped  # discovery's, with the batches' added
    batches: BatchLog  # in the order taken
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, batch: Batch) -> None:
        """Take a batch's state entry (reused and carved ones as recorded)."""
        self.skipped.extend(tuple(s) for s in batch.skipped)
        self.count(batch.counts)
        self.batches.add(batch)

    def inputs(self) -> Iterator[dict]:
        """The manifest's entries of the files read, in the order their batches were taken."""
        return (i for b in self.batches for i in b.inputs)

    def count(self, counts: dict[str, int]) -> None:
        for k, v in counts.items():
            self.counts[k] = self.counts.get(k, 0) + v


def reuse_summary(
    previous: State | None, plan: reuse.Plan, carved_batches: list[Batch], converting: set[str], inputs: int, *,
    verify: bool, final_reused: bool, not_converted: list[dict], deltas: dict,
) -> dict:
    """The manifest's `reuse`: what this run reused of the previous output, converted, kept or pruned."""
    reused_inputs = sum(len(b.inputs) for b in [*plan.reused, *carved_batches])
    return {
        "previous_output": previous is not None,
        "session_groups_reused": len(
            {o for b in [*plan.reused, *carved_batches] for o in b.groups} - converting - plan.kept
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
        # groups that needed more memory than the run may use: declared losses (`run.schedule.declare_too_large`)
        **({"session_groups_not_converted": len(not_converted)} if not_converted else {}),
        # grown groups re-run as deltas (only when there were some): docs/asr-tables.md, "Re-runs"
        **({"deltas": deltas} if deltas else {}),
    }
