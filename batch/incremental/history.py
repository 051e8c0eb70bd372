"""What a re-run says and checks of the previous output's session groups: the groups whose
sources it found (`found_the_same`), when each group's source was last read (`reads`, the state's and
`sessions.source_last_read_at`), the groups kept with their inputs (`kept`), the files whose earlier
lines a conversion replaced (`replaced`), `--verify`'s digests (`unverified`), and what a run
rebuilt from earlier outputs (`carried`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import polars as pl

from batch import reuse
from batch.incremental.state import Batch, State
from batch.output.folder import Output
from batch.sources.base import Stream, Unit, fingerprint_entries
from batch.sources.files import FileTable


def unverified(plan: reuse.Plan, units: list[Unit]) -> set[str]:
    """Owners of the reused batches whose files' SHA-256 differ from those recorded (`--verify`)."""
    owners = {owner for batch in plan.reused for owner in batch.groups}
    digests = {}
    for unit in units:
        if unit.owner in owners:
            loaded = unit.load()
            for stream in loaded.streams:
                with stream.open() as f:
                    digests[stream.name] = hashlib.file_digest(f, "sha256").hexdigest()
            # inputs a source read itself (an Entire transcript.jsonl), hashed as it read them
            digests.update((i["path"], i.get("sha256")) for i in loaded.inputs)
    return reuse.unverified(plan.reused, digests, plan.kept)


def found_the_same(state: State | None, owners: set[str]) -> bool:
    """Whether the groups whose sources the run that wrote `state` found are `owners` (False when
    there is no state): its reads compared in owner order, an entry at a time."""
    if state is None:
        return False
    wanted = iter(sorted(owners))
    for owner, r in state.reads_by_owner():
        if isinstance(r, list) and len(r) == 2 and r[1] is True and next(wanted, None) != owner:
            return False
    return next(wanted, None) is None


def reads(
    previous: State | None, current: Iterable[str], converting: set[str], kept: frozenset[str], read_at: str,
    carried: dict[str, str | None] | None = None,
) -> Iterator[tuple[str, list]]:
    """Per group of the new output (`current`: the groups the inputs give), in owner order: [when its
    source was last read, whether this run found it]. A group converted now was read now; a reused or
    kept one keeps the time the state records (None when an earlier state did not record it); one
    rebuilt from an earlier output (`carried`: when that output's run last read it) is not found. The
    state's reads are merged in, an entry at a time (`State.reads_by_owner`)."""
    carried = carried or {}
    before = iter(previous.reads_by_owner() if previous else ())
    earlier = next(before, None)
    for owner in sorted({*current, *kept, *carried}):
        while earlier is not None and earlier[0] < owner:
            earlier = next(before, None)
        r = earlier[1] if earlier is not None and earlier[0] == owner else None
        last = r[0] if isinstance(r, list) and r and isinstance(r[0], str) else None
        if owner in carried:
            yield owner, [last if carried[owner] is None else carried[owner], False]
        elif owner in kept:
            yield owner, [last, False]
        else:
            yield owner, [read_at if owner in converting else last, True]


def carried(archives: list, taken: dict, inputs: Iterable[dict], *, out: Path) -> dict:
    """The manifest's `carried`: each earlier output read as a source (sources/archive.py) with the
    groups this run rebuilt from it, the rebuilt files whose SHA-256 is not the one it recorded
    (`inexact`), and the files it holds without their bytes (`not_carried`) that this run did not
    take (read again from their own source, or carried as written: their inputs are the run's)."""
    digests = {i["path"]: i.get("sha256") for i in inputs}
    recorded = {name: sha for a in archives for name, sha in a.recorded.items()}
    names = {
        e[0] for a in archives for u in a.units if taken.get(u.owner) is a for e in fingerprint_entries(u.fingerprint)
    }
    return {
        "from": [
            {
                "output": str(a.root) if a.root != out.resolve() else "(the previous output)",
                "written_by": {"version": a.written.version, "archive_format": a.written.archive_format},
                "session_groups": sorted(o for o, b in taken.items() if b is a),
                # the Git repositories of Entire checkpoints rebuilt from its copy of their objects
                "repositories": sorted(r.name for r in a.repositories),
            }
            for a in archives
        ],
        "inexact": sorted(n for n in names if n in digests and digests[n] != recorded.get(n)),
        # those this run did not read again from their own source (an Entire repository given again)
        "not_carried": sorted(
            ({**e, "output": str(a.root)} for a in archives for e in a.not_carried if e["path"] not in digests),
            key=lambda e: (e["output"], e["path"]),
        ),
    }


def kept(state_batches: Iterable[Batch], last_read: dict[str, str | None]) -> list[dict]:
    """The manifest's `kept`: each group whose source this run did not find (`last_read`: when each
    was last read), with the inputs it was last read from (the manifest's `inputs` still list them) and when."""
    gone = set(last_read)
    owner_of = {
        name: o for b in state_batches for o in gone & b.groups.keys() for name, *_ in fingerprint_entries(b.groups[o])
    }
    paths: dict[str, set[str]] = {}
    for b in state_batches:
        if not gone & b.groups.keys():  # a group's inputs are recorded by a batch holding it
            continue
        for i in b.inputs:
            if i["path"] in owner_of:
                paths.setdefault(owner_of[i["path"]], set()).add(i["path"])
    return [
        {"session_key": o, "source_last_read_at": last_read[o], "inputs": sorted(paths.get(o, ()))}
        for o in sorted(gone)
    ]


def replaced(
    output: Output, state: State | None, found: FileTable, owners: set[str], current: dict[str, str | None]
) -> list[dict]:
    """The files of the previous output, among the groups `owners` converted again, whose earlier
    lines are not all in them any more: gone while their group is still there, shorter than
    before, or whose first bytes (as many as the previous run read) have another SHA-256 than the
    one recorded (a file rewritten in place, such as a Codex rollout `codex migrate-rollouts` made
    paginated). Each with the lines the previous output held of it (`source_lines`). `found`: the
    files discovery found, Claude Code transcripts and Codex rollouts."""
    if not state or not owners:
        return []
    before = {o: fp for o, fp in state.owners().items() if o in owners and current.get(o) is not None}
    recorded = state.recorded(set(before))

    def entries():  # (a file of the previous output as fingerprinted then, as it is now), in order
        for owner, fp in sorted(before.items()):
            now = {e[0]: e for e in fingerprint_entries(current[owner]) if isinstance(e, list)}
            for entry in fingerprint_entries(fp):
                if isinstance(entry, list) and len(entry) == 4 and isinstance(entry[1], int):
                    yield entry, now.get(entry[0])
                # (else a Git object or an events file: not a file read by its bytes)

    # the streams of the files whose first bytes may have been rewritten, read from discovery's table
    files = found.streams_named({e[0] for e, now in entries() if now is not None and len(now) == 4
                                 and now[1] >= e[1] and now[:3] != e[:3]})
    found_replaced = {}
    for entry, now in entries():
        name, size = entry[0], entry[1]
        if now is None:
            found_replaced[name] = "gone"
        elif len(now) != 4:
            continue  # gone, and converted from the output's copy of it (`plan.carry_gone_files`)
        elif now[1] < size:
            found_replaced[name] = "rewritten"
        elif now[:3] != entry[:3] and name in files:
            if recorded.get(name) is None or prefix_sha256(files[name], size) != recorded[name]:
                found_replaced[name] = "rewritten"
    if not found_replaced:
        return []
    lines = dict(
        pl.scan_parquet(output.out / "source_lines" / "*.parquet")
        .filter(pl.col("source_file").is_in(list(found_replaced)))
        .group_by("source_file").len().collect().iter_rows()
    ) if (output.out / "source_lines").is_dir() else {}
    return [
        {"path": name, "reason": reason, "lines_before": int(lines.get(name, 0))}
        for name, reason in sorted(found_replaced.items()) if lines.get(name)
    ]


def prefix_sha256(stream: Stream, size: int) -> str | None:
    """The SHA-256 of the first `size` bytes of a file's stream; None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with stream.open() as f:
            while size > 0:
                block = f.read(min(size, 1 << 20))
                if not block:
                    return None
                digest.update(block)
                size -= len(block)
    except OSError:
        return None
    return digest.hexdigest()
