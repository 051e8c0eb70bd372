"""Which batches of the previous output an incremental run reuses: pure functions, no filesystem.

A batch's parts are named by its session groups (`part_id`). The output's reuse state
(`_reuse.json`, written by batch/output/folder.py) lists each batch with the fingerprint of each of its
groups: the name, size and modification time of every file, as make and rsync compare them, and
for a session read from Git (Entire checkpoints) the IDs of the objects it reads
(formats/entire_checkpoint.py `fingerprint`). A batch is reused when every group it holds is
still there with the same fingerprint. A batch that holds both such groups and changed or removed
ones is carved: the unchanged groups' rows are taken out of its parts into parts of their own
(batch/pipeline.py), and only the changed groups are converted again, in new batches.

A group that the previous output holds and that this run's inputs no longer provide (its files
deleted, its folder moved away, its input not given this time) is kept: its rows are reused as an
unchanged group's are, and the output says its source is gone (`Plan.kept`). Only `prune` drops it.

A group whose files only grew (`grown`) may instead be re-run as a delta (batch/incremental/deltas.py
`run_deltas`): the parts holding its rows stay, and a new batch holds only its rows that are new. Its
rows then span several batches of the state, each listing the group with its current fingerprint;
`spread` gives the groups that must be dropped together when one of them is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from batch.incremental.state import Batch, State
from batch.sources.base import Told, Unit, fingerprint_entries, fingerprint_text, fingerprint_texts


def part_id(owners: list[str] | tuple[str, ...]) -> str:
    """The name of a batch's parts: 16 hex digits of the SHA-256 of its groups' owners."""
    return hashlib.sha256("\n".join(sorted(set(owners))).encode()).hexdigest()[:16]


def fingerprints(units: list[Unit]) -> dict[str, str | Told | None]:
    """Each owner's fingerprint as the state stores it (`fingerprint_text`), or what tells it when
    asked (`fingerprint_of`); None when a unit of it has none. An owner of one unit shares its
    fingerprint given as text or told rather than a copy (held for the whole run)."""
    found: dict[str, str | Told | None] = {}
    for unit in units:
        if unit.owner in found and found[unit.owner] is None:
            continue
        if unit.fingerprint is None:
            found[unit.owner] = None
        elif unit.owner not in found and not isinstance(unit.fingerprint, (tuple, list)):
            found[unit.owner] = unit.fingerprint
        else:
            # entries of several sources (files, Git objects) differ in shape: ordered by their JSON text
            found[unit.owner] = fingerprint_text(
                [*fingerprint_entries(found.get(unit.owner)), *fingerprint_entries(unit.fingerprint)]
            )
    return found


@dataclass
class Plan:
    """What an incremental run reuses and what it converts."""

    reused: list[Batch]  # batches of the previous state, as recorded there
    units: list[Unit]  # the units to convert
    complete: bool  # every batch of the previous output is reused: nothing was added, changed or removed
    changed: frozenset[str] = frozenset()  # owners of `units` that are new or changed (the others shared a batch with one)
    # batches of the previous state that also hold changed or removed groups, each with the owners of
    # its unchanged groups, whose rows are carved out of its parts instead of being converted again
    carved: list[tuple[Batch, frozenset[str]]] = field(default_factory=list)
    kept: frozenset[str] = frozenset()  # groups of the previous output this run's inputs no longer provide
    pruned: frozenset[str] = frozenset()  # such groups dropped (`prune`)

    def batches(self) -> list[list[Unit]]:
        """The units to convert, in two sets: new or changed groups, then the unchanged groups that
        shared a batch with one. Live sessions (the ones that grow) so gather in batches of their
        own, and the next runs leave the others' batches alone."""
        fresh = [u for u in self.units if u.owner in self.changed]
        return [fresh, [u for u in self.units if u.owner not in self.changed]] if fresh else [list(self.units)]


def plan(
    units: list[Unit], previous: State | None, *, key: str, current: dict[str, str | None] | None = None,
    prune: bool = False, full: bool = False,
) -> Plan:
    """Split `units` into the previous batches that can be reused and the units to convert
    (`current`: the units' `fingerprints`, when computed already).

    The previous output's groups that no unit provides are kept (reused as they are), unless
    `prune`. With `full`, or when the persisted tool results present changed (`key`), every group
    a unit provides is converted again; the kept groups are still reused."""
    current = fingerprints(units) if current is None else current
    if previous is None:
        return Plan([], list(units), False)
    full = full or previous.run_key != key
    reused, carved, taken = [], [], set()
    batches = previous.batches
    before = previous.owners()
    # a group no unit provides, none of whose files is in another group now (a file classified
    # anew, a session become another's subagent, is converted again where it is)
    absent = {o: [e[0] for e in fingerprint_entries(before[o])] for o in before.keys() - current.keys()}
    names = given(current, {name for names in absent.values() for name in names})
    gone = frozenset(o for o, files in absent.items() if not any(name in names for name in files))
    kept = frozenset() if prune else gone
    for batch in batches:
        groups = batch.groups
        same = frozenset(o for o, fp in groups.items() if unchanged(o, fp, current, kept) and not (full and o not in kept))
        if groups and len(same) == len(groups):
            reused.append(batch)
            taken.update(groups)
        elif same:
            carved.append((batch, same))
            taken.update(same)
    rest = [u for u in units if u.owner not in taken]
    changed = frozenset(
        u.owner for u in rest if full or current[u.owner] is None or before.get(u.owner) != current[u.owner]
    )
    complete = not rest and not carved and len(reused) == len(batches)
    return Plan(reused, rest, complete, changed, carved, kept, gone - kept)


def given(current: dict[str, str | None], wanted: set[str]) -> set[str]:
    """The names among `wanted` that the fingerprints `current` give (each parsed only when some are wanted)."""
    if not wanted:
        return set()
    return {e[0] for text in fingerprint_texts(current.values()) for e in fingerprint_entries(text) if e[0] in wanted}


def unchanged(owner: str, fp: str | None, current: dict[str, str | Told | None], kept: frozenset[str]) -> bool:
    """Whether a group of the previous output stays as it is: its fingerprint is the same, or it is kept.
    (A fingerprint told when asked is not the previous output's: `incremental.plan.plan` gave the
    unchanged ones the state's text.)"""
    return owner in kept or (current.get(owner) is not None and current[owner] == fp)


def unverified(reused: list[Batch], digests: dict[str, str], kept: frozenset[str] = frozenset()) -> set[str]:
    """Owners of reused batches whose files' SHA-256 (`digests`, by input path) differ from those
    recorded; the inputs of a batch holding `kept` groups (whose files are gone) are compared where
    they were read."""
    changed = set()
    for batch in reused:
        recorded = {i["path"]: i.get("sha256") for i in batch.inputs}
        if kept & batch.groups.keys():
            recorded = {path: sha for path, sha in recorded.items() if path in digests}
        if any(digests.get(path) != sha for path, sha in recorded.items()):
            changed.update(batch.groups)
    return changed


def grown(before: str | None, now: str | None) -> bool:
    """Whether a group's files (fingerprints `before` and `now`, as stored in the state) only grew:
    every file of `before` is still there under its name, at least as large, with the same sidecar
    digest (new files are allowed). Only files fingerprinted by name, size, time and sidecar qualify."""

    def files(fp: str | None) -> dict[str, list] | None:
        entries = {}
        for e in fingerprint_entries(fp):
            if not (isinstance(e, list) and len(e) == 4 and isinstance(e[0], str) and isinstance(e[1], int)
                    and isinstance(e[2], int) and (e[3] is None or isinstance(e[3], str))):
                return None
            entries[e[0]] = e
        return entries or None

    old, new = files(before), files(now)
    if old is None or new is None or old == new:
        return False
    return all(name in new and new[name][1] >= size and new[name][3] == sidecar for name, size, _, sidecar in old.values())


def spread(batches: tuple[Batch, ...] | list[Batch], owners: set[str]) -> set[str]:
    """`owners` and every group that shares a batch with one of them, transitively: the groups whose
    rows go when the batches holding `owners` are dropped (a group's rows may span several batches)."""
    found = set(owners)
    while True:
        more = {o for b in batches if found & b.groups.keys() for o in b.groups} - found
        if not more:
            return found
        found |= more


def without(previous: State, owners: set[str]) -> State:
    """The state `previous` without the batches holding `owners`, or sharing a group with one that does."""
    gone = spread(previous.batches, owners)
    return previous.with_batches([b for b in previous.batches if not gone & b.groups.keys()])


def unique_part(wanted: str, used: set[str]) -> str:
    """`wanted`, or a name derived from it, that is not in `used` (which it is added to)."""
    name, n = wanted, 0
    while name in used:
        n += 1
        name = hashlib.sha256(f"{wanted}:{n}".encode()).hexdigest()[:16]
    used.add(name)
    return name
