"""The order of steps, declared once: discover -> load -> shape -> fold (SQL) -> write -> finalize."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from batch import reuse, sql
from batch.errors import OutputError, SourceError
from batch.formats import claude_code, entire_checkpoint, entire_events
from batch.formats.store import STORE_MEMORY
from batch.incremental import carving, deltas
from batch.run import executors, task
from batch.run.memory import (
    DEFAULT_BATCH_BYTES, Stop, arrow_pool, connect, default_workers, large_groups_message, largest_line,
)
from batch.schema import TABLES, TABLES_BY_NAME
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import Unit, batches
from batch.sources.claude_code import Discovery, discover, units
from batch.sources.git import is_repository
from batch.version import FORMAT_NAME, FORMAT_VERSION, PRODUCER, VERSION
from batch.write import (
    WORK, Output, fault, finish_interrupted_swap, forget_manifest, lock_output, read_state, state_unreadable,
)

SOURCE_LOSSES = "source_losses"
# What the final stage reports in the manifest besides its tables (sql/<name>.sql).
MANIFEST_RELATIONS = ("unassigned_facts", "absent_files")
# Output tables of the final stage that sources fill once per run (Entire checkpoints and trailers).
SOURCE_TABLES = entire_checkpoint.RUN_TABLES
BATCH_TABLE_NAMES = [t.name for t in TABLES if t.stage == "batch"]
FINAL_TABLE_NAMES = [t.name for t in TABLES if t.stage == "final"]


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


@dataclass
class _Inputs:
    """Every source's discovery: units of work, and what sources contribute once per run."""

    found: Discovery
    units: list[Unit]
    imports: list[entire_checkpoint.Import]
    event_heads: dict[str, list] = field(default_factory=dict)  # EventFiles.heads


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
    given = [*sources, *entire_events, *(p for p in entire if is_repository(p))]  # else discovery says what is wrong
    _check_apart([_git_folder(p) if is_repository(p) else p.resolve() for p in given], out)
    with lock_output(out, warn):
        return _convert(
            sources, out, entire=entire, entire_events=entire_events, all_checkpoints=all_checkpoints,
            batch_bytes=batch_bytes, workers=workers, executor=executor, full=full, verify=verify, prune=prune,
            memory=memory_bytes, progress=progress, warn=warn,
        )


def _convert(
    sources: list[Path], out: Path, *, entire, entire_events, all_checkpoints: bool, batch_bytes: int,
    workers: int | None, executor: str, full: bool, verify: bool, prune: bool, memory: int | None, progress, warn,
) -> ConvertResult:
    started = time.perf_counter()
    read_at = _now()
    arrow_pool()
    # a run killed between the two renames of its swap left no `out`: its output becomes `out` again
    finished = finish_interrupted_swap(out)
    if finished is not None and warn:
        warn(f"{out} was missing: the output of a run interrupted while it replaced it ({finished.name}) is {out} again.")
    # the previous output's reuse state, read before discovery: it knows the heads of unchanged files
    # (and, even with --full, which groups the output holds: those no input provides are kept)
    previous = read_state(out)
    if previous is None and not prune:
        _check_keepable(out)
    known = previous.get("heads") if previous and not (verify or full) else None
    known = known if isinstance(known, dict) else None
    known_events = previous.get("event_heads") if previous and not (verify or full) else None
    known_events = known_events if isinstance(known_events, dict) else None
    found_all = _discover(
        sources, list(entire), combine=all_checkpoints, events=list(entire_events), known=known, known_events=known_events
    )
    found = found_all.found
    _check_apart(found.roots, out)
    if not found_all.units:
        raise SourceError(_nothing_found_message(sources, found, found_all.imports))
    output = Output(out)
    if output.stale_removed and warn:
        warn(f"removed {output.stale_removed} unfinished output folder(s) of {out} left by an interrupted run.")
    stop = Stop()
    try:
        key = reuse.run_key(found.tool_result_files)
        imports_key = entire_checkpoint.run_key(found_all.imports)
        owners_fp = reuse.fingerprints(found_all.units)
        options = {"key": key, "current": owners_fp, "prune": prune, "full": full}
        plan = reuse.plan(found_all.units, previous, **options)
        state = previous
        # a batch whose parts are no longer all there (removed by hand) is converted again
        missing = {
            owner for b in plan.reused
            if output.parts(b["part"], list(b["counts"]), previous=True) != list(b["counts"])
            or output.parts(b["part"], b.get("work", []), work=True, previous=True) != b.get("work", [])
            for owner in b["groups"]
        }
        if verify and plan.reused:
            missing |= _unverified(plan, found_all.units)
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
                _check_kept(out, previous, missing, plan.kept)
                state = reuse.without(previous, missing)
                plan = replace(reuse.plan(found_all.units, state, **options), complete=False)
            growing = {} if verify or full else deltas.growing_groups(plan, state, found, found_all.units, owners_fp, batch_bytes)
            touched = [b for b in (state or {}).get("batches", []) if growing.keys() & b["groups"].keys()]
            bad = set()
            for b in [*touched, *(b for b, _ in plan.carved)]:
                if b["part"] not in splits:
                    splits[b["part"]] = carving.split(output, b, keys)
                if splits[b["part"]] is None:
                    bad |= b["groups"].keys()
            if not bad - missing:
                break
            missing |= bad
        # nothing changed (every batch reused, the imports' run-level rows the same): the final stage
        # and what the manifest reports of it are the previous run's. The previous manifest was parsed
        # when the output was found to be ours: taken now, else not held while batches are converted.
        # ... and the same groups' sources were found as in the previous run (`sessions.source_present`)
        final_reused = plan.complete and previous.get("imports") == imports_key and _present(previous) == set(owners_fp)
        previous_manifest = output.previous_manifest() if final_reused else None
        forget_manifest()
        used = {b["part"] for b in [*plan.reused, *touched]} | {reuse.part_id(())}
        # the grown groups re-run as deltas: their new rows in batches of their own, and what of
        # their previous rows is kept or dropped, per table (`deltas.run_deltas`)
        delta_batches, dropped, delta_summary = [], {}, {}
        if growing:
            delta_batches, dropped, delta_summary, whole = deltas.run_deltas(
                output, growing, touched, splits, found.tool_result_files, batch_bytes, used, owners_fp, stop,
                task.convert_batch,
            )
            growing = {owner: g for owner, g in growing.items() if owner not in whole}
        # files of the previous output whose earlier lines this run replaces (rewritten, or gone from a
        # group that is still there): named in the manifest with the lines the previous output held
        replaced = _replaced(output, state, found, {u.owner for u in plan.units} - plan.kept, owners_fp)
        plan = replace(plan, units=[u for u in plan.units if u.owner not in growing])
        # the unchanged groups of a batch that also held changed ones: their rows are carved out of
        # its parts (one at a time: carving two batches at once took more CPU seconds, docs/decisions/009-carving.md)
        carved_batches = []
        for old in touched:
            same = frozenset(o for o, fp in old["groups"].items() if reuse.unchanged(o, fp, owners_fp, plan.kept))
            carved = carving.carve(output, old, splits[old["part"]], same, old["part"], dropped=dropped, growing=growing)
            if carved is not None:
                carved_batches.append(carved)
        taken = {b["part"] for b in touched}
        for old, keep in plan.carved:
            if old["part"] not in taken:
                part = reuse.unique_part(reuse.part_id(sorted(keep)), used)
                carved_batches.append(carving.carve(output, old, splits[old["part"]], keep, part))
        total = sum(u.size for u in found_all.units)
        converting = {u.owner for u in plan.units} | growing.keys()
        done = sum(u.size for u in found_all.units if u.owner not in converting)
        taken = _Taken([], list(found.skipped))
        inputs, skipped, counts, state_batches = taken.inputs, taken.skipped, taken.counts, taken.batches
        for batch in plan.reused:
            output.reuse(batch["part"], BATCH_TABLE_NAMES, list(WORK_SCHEMAS))
        # reused and carved batches are taken as recorded: their inputs, skipped paths and row counts
        # (a group's inputs are recorded by one batch, its newest, even when its rows span several)
        for batch in [*plan.reused, *carved_batches, *delta_batches]:
            batch["inputs"] = entire_checkpoint.current_provenance(batch["inputs"], found_all.imports)
            taken.add(batch)
        if progress and done:
            progress(done, total)
        groups = [group for units in plan.batches() for group in batches(units, max_bytes=batch_bytes)]
        workers = workers or default_workers()
        sizes = [sum(u.size for u in group) for group in groups]
        large = [group for group, size in zip(groups, sizes) if size > batch_bytes]
        if large and warn:
            warn(large_groups_message(large, batch_bytes, memory))

        def converted(size: int) -> None:
            nonlocal done
            done += size
            if progress:
                progress(done, total)

        lost = _run_batches(
            groups, sizes, output=output, tool_result_files=found.tool_result_files, used=used, executor=executor,
            workers=workers, roots=found.roots, batch_bytes=batch_bytes, stop=stop, memory=memory, owners_fp=owners_fp,
            taken=taken, converted=converted,
        )
        fault("batches")
        not_converted = [_too_large(output, units, error, used, skipped) for units, error in lost]
        # a group converted by an earlier run keeps the rows that run wrote (`carving.keep_previous`)
        for entry in not_converted:
            for batch in carving.keep_previous(output, state, splits, keys, entry["session_key"], used):
                entry["previous_rows_kept"] = True
                taken.add(batch)
        unconverted = {entry["session_key"] for entry in not_converted if entry.get("previous_rows_kept")}
        run_frames = _run_frames(found_all.imports)
        if previous is not None and not prune:
            _keep_run_rows(output, run_frames)
        taken.count(_write_source_parts(output, run_frames, reuse.part_id(())))
        inputs.sort(key=lambda i: i["path"])
        reads = _reads(previous, owners_fp, converting - unconverted, plan.kept, read_at)
        state_batches.sort(key=lambda b: b["part"])
        summary = _reuse_summary(
            previous, plan, carved_batches, converting, len(inputs), verify=verify, final_reused=final_reused,
            not_converted=not_converted, deltas=delta_summary,
        )
        if summary["final_stage"] == "reused":
            # nothing changed: the final tables and what the manifest reports of them are the previous ones
            output.reuse(f"{0:05d}", FINAL_TABLE_NAMES, [])
            output.reuse_catalog()  # its views and stored tables read the same files
            manifest = {
                **previous_manifest, "skipped": _skipped(skipped), "reuse": summary, "replaced": [], "not_converted": [],
            }
        else:
            sources_read = _SourceReads(reads, carving.session_owners({"batches": state_batches}))
            with connect(spill=output.spill) as con:
                final_counts, unassigned, absent, source_losses = _finalize(con, output, run_frames, sources_read)
            counts.update(final_counts)
            manifest = _manifest(
                found, inputs, skipped, counts, unassigned, absent, found_all.imports, source_losses, summary
            )
            manifest["kept"] = _kept(state_batches, reads)
            manifest["not_converted"] = not_converted
            manifest["replaced"] = replaced
        output.write_state({
            "run_key": key, "imports": imports_key, "heads": found.heads, "event_heads": found_all.event_heads,
            "batches": state_batches, "reads": reads,
        })
        output.write_manifest(manifest)
        output.commit()
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
            collect(wait({submit(units, True, largest_line(memory or STORE_MEMORY))}).done)
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


def _unverified(plan: reuse.Plan, units: list[Unit]) -> set[str]:
    """Owners of the reused batches whose files' SHA-256 differ from those recorded (`--verify`)."""
    owners = {owner for batch in plan.reused for owner in batch["groups"]}
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


def _skipped(skipped: list[tuple[str, str]]) -> list[dict]:
    return [{"path": p, "reason": r} for p, r in sorted(skipped)]


def _discover(
    sources: list[Path], entire: list[Path], *, combine: bool, events: list[Path] = (), known: dict | None = None,
    known_events: dict | None = None,
) -> _Inputs:
    """Ask each source for its units: Git repositories hold Entire checkpoints, other paths Claude Code files.
    `known` and `known_events`: the heads of Claude Code files and of event files a previous discovery
    read (`claude_code.discover`, `entire_events.discover`)."""
    repos = [p for p in sources if is_repository(p)] + entire
    paths = [p for p in sources if p not in repos]
    found = discover(paths, known=known) if paths else Discovery()
    # one import per repository, however often and however spelled it is named
    unique = {_git_folder(p): p for p in reversed(repos)}
    imports = [entire_checkpoint.discover(repo, combine=combine) for repo in reversed(unique.values())]
    for imp in imports:
        # what is read of a repository is its Git folder: an output in its working tree is fine
        git_folder = _git_folder(imp.root)
        if git_folder not in found.roots:
            found.roots.append(git_folder)
    all_units = units(found.files) + [u for imp in imports for u in imp.units]
    event_heads = {}
    if events:  # files of Entire lifecycle events, named with --entire-events
        event_units, event_files = entire_events.discover(events, known=known_events)
        all_units += event_units
        found.skipped += event_files.skipped
        found.roots += [r for r in event_files.roots if r not in found.roots]
        event_heads = event_files.heads
    return _Inputs(found, all_units, imports, event_heads)


def _git_folder(path: Path) -> Path:
    # a working tree and its .git folder are one repository
    return (path / ".git").resolve() if (path / ".git").is_dir() else path.resolve()


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


def _nothing_found_message(sources: list[Path], found: Discovery, imports: list[entire_checkpoint.Import]) -> str:
    where = ", ".join(str(s) for s in sources) or ", ".join(str(i.root) for i in imports)
    if imports and not found.files and len(imports) == len(found.roots):
        return (
            f"no Entire checkpoints found in {where}: looked for the entire/checkpoints/v1 branch (and its "
            "remote-tracking copies) and refs/entire/checkpoints/<shard>/<id>. Fetch them first "
            "(git fetch origin entire/checkpoints/v1:entire/checkpoints/v1) or pass a Claude Code projects folder."
        )
    hint = ""
    repos = [str(r) for r in found.roots if r.is_dir() and ((r / ".git").exists() or (r / "HEAD").is_file())]
    if repos:
        hint = f" {repos[0]} is a Git repository: asr-batch reads Claude Code transcript folders, not repositories."
    seen = f" ({len(found.skipped)} other files or folders were looked at and skipped)" if found.skipped else ""
    return (
        f"no Claude Code transcripts found in {where}{seen}: looked for <project>/<session id>.jsonl files and "
        f"their subagents' agent-*.jsonl.{hint} Pass ~/.claude/projects, a project folder or .jsonl files."
    )


def _concat(schema: pa.Schema, frames: list[pl.DataFrame]) -> pl.DataFrame | pa.Table:
    """Frames of one output table from several formats and sources as one table (Output.write casts it)."""
    if len(frames) == 1:
        return frames[0]
    return task.cast(schema, frames)


def _run_frames(imports: list[entire_checkpoint.Import]) -> dict[str, list[pl.DataFrame]]:
    frames: dict[str, list[pl.DataFrame]] = {}
    for imp in imports:
        for name, frame in imp.frames.items():
            frames.setdefault(name, []).append(frame)
    return frames


# The rows sources give once per run (Entire's scans), by the column that names what they describe:
# a previous output's rows that this run's scans do not give again (a repository not given this
# time, a checkpoint pruned from one) are kept, as the session groups read from them are.
# The scans' losses are kept the same way, by category and detail (which names the checkpoint).
RUN_ROW_KEYS = {
    "checkpoints": ["checkpoint_id"], "checkpoint_sessions": ["checkpoint_id"], "checkpoint_commits": ["commit_id"],
    "vcs_events": ["commit_id"], "losses": ["category", "detail"],
}


def _keep_run_rows(output: Output, frames: dict[str, list[pl.DataFrame]]) -> None:
    """Add to `frames` the previous output's run-level rows whose key this run's scans do not give."""
    run_part = f"part-{reuse.part_id(())}.parquet"
    for name, key in RUN_ROW_KEYS.items():
        if name == "losses":  # the scans' losses are a work part of their own (`_write_source_parts`)
            files = [output.out / WORK / SOURCE_LOSSES / run_part]
        elif TABLES_BY_NAME[name].stage == "batch":
            files = [output.out / name / run_part]
        else:
            files = sorted((output.out / name).glob("part-*.parquet"))
        files = [f for f in files if f.is_file() and not f.is_symlink() and pq.read_metadata(f).num_rows]
        if not files:
            continue
        before = pl.concat([pl.read_parquet(f) for f in files])
        given = pl.concat([f.select(key) for f in frames.get(name, [])]) if frames.get(name) else before.clear().select(key)
        kept = before.join(given.unique(), on=key, how="anti", nulls_equal=True)
        if kept.height:
            frames.setdefault(name, []).append(kept)


def _write_source_parts(output: Output, frames: dict[str, list[pl.DataFrame]], index: str) -> dict[str, int]:
    """Write the rows sources contribute once per run to batch tables (vcs_events of commit trailers), as one
    more part after the batches' parts; the scans' losses as a part of the work table `source_losses`."""
    if frames.get("losses"):
        output.write_work(SOURCE_LOSSES, pl.from_arrow(task.cast(WORK_SCHEMAS[SOURCE_LOSSES], frames["losses"])), index)
    counts = {}
    for table in TABLES:
        if table.stage == "batch" and frames.get(table.name):
            counts[table.name] = output.write(table, _concat(table.schema, frames[table.name]), index)
    return counts


def _now() -> str:
    """This moment in UTC, as the state and the manifest write it (ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _present(state: dict | None) -> set[str] | None:
    """The groups whose sources the run that wrote `state` found (None when it does not say)."""
    reads = (state or {}).get("reads")
    if not isinstance(reads, dict):
        return None
    return {o for o, r in reads.items() if isinstance(r, list) and len(r) == 2 and r[1] is True}


def _reads(
    previous: dict | None, current: dict, converting: set[str], kept: frozenset[str], read_at: str
) -> dict[str, list]:
    """Per group of the new output: [when its source was last read, whether this run found it].
    A group converted now was read now; a reused or kept one keeps the time the state records
    (None when an earlier state did not record it)."""
    before = (previous or {}).get("reads")
    before = before if isinstance(before, dict) else {}

    def last(owner: str) -> str | None:
        r = before.get(owner)
        return r[0] if isinstance(r, list) and r and isinstance(r[0], str) else None

    reads = {o: [read_at if o in converting else last(o), True] for o in current}
    reads.update((o, [last(o), False]) for o in kept)
    return dict(sorted(reads.items()))


@dataclass
class _SourceReads:
    """Whether each session's source was found by this run, and when it was last read: the
    `sessions` columns `source_present` and `source_last_read_at`, by the session's group."""

    reads: dict[str, list]  # `_reads`
    key_owner: dict[str, str]  # the group of each session among the inputs (`carving.session_owners`)

    def columns(self, sessions: pl.DataFrame) -> pl.DataFrame:
        # a group's main session is of the group even when no input names it (an Entire session without transcript)
        owner = carving.session_group(pl.col("session_key"), {**{o: o for o in self.reads}, **self.key_owner}, list(self.reads))
        present = {o: r[1] for o, r in self.reads.items()}
        at = {o: r[0] for o, r in self.reads.items()}
        return sessions.with_columns(
            source_present=owner.replace_strict(present, default=None, return_dtype=pl.Boolean),
            source_last_read_at=owner.replace_strict(at, default=None, return_dtype=pl.String)
            .str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_unit="us", time_zone="UTC"),
        )


def _kept(state_batches: list[dict], reads: dict[str, list]) -> list[dict]:
    """The manifest's `kept`: each group whose source this run did not find, with the inputs it was
    last read from (the manifest's `inputs` still list them) and when."""
    gone = {o for o, (_, present) in reads.items() if not present}
    owner_of = {name: o for b in state_batches for o in gone & b["groups"].keys() for name, *_ in b["groups"][o] or []}
    paths: dict[str, set[str]] = {}
    for b in state_batches:
        for i in b["inputs"]:
            if i["path"] in owner_of:
                paths.setdefault(owner_of[i["path"]], set()).add(i["path"])
    return [
        {"session_key": o, "source_last_read_at": reads[o][0], "inputs": sorted(paths.get(o, ()))}
        for o in sorted(gone)
    ]


def _replaced(
    output: Output, state: dict | None, found: Discovery, owners: set[str], current: dict[str, list | None]
) -> list[dict]:
    """The files of the previous output, among the groups `owners` converted again, whose earlier
    lines are not all in them any more: gone while their group is still there, shorter than
    before, or whose first bytes (as many as the previous run read) have another SHA-256 than the
    one recorded. Each with the lines the previous output held of it (`source_lines`)."""
    if not state or not owners:
        return []
    paths = {f.name: f.path for f in found.files}
    recorded = {i["path"]: i.get("sha256") for b in state.get("batches", []) for i in b["inputs"]}
    before = {o: fp for b in state.get("batches", []) for o, fp in b["groups"].items() if o in owners}
    found_replaced = {}
    for owner, fp in sorted(before.items()):
        if current.get(owner) is None:
            continue
        now = {e[0]: e for e in current.get(owner) or [] if isinstance(e, list) and len(e) == 4}
        for entry in fp or []:
            if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[1], int)):
                continue  # a Git object or an events file: not a file read by its bytes
            name, size = entry[0], entry[1]
            if name not in now:
                found_replaced[name] = "gone"
            elif now[name][1] < size:
                found_replaced[name] = "rewritten"
            elif now[name][:3] != entry[:3] and paths.get(name) is not None:
                if recorded.get(name) is None or _prefix_sha256(paths[name], size) != recorded[name]:
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


def _prefix_sha256(path: Path, size: int) -> str | None:
    """The SHA-256 of the first `size` bytes of a file; None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while size > 0:
                block = f.read(min(size, 1 << 20))
                if not block:
                    return None
                digest.update(block)
                size -= len(block)
    except OSError:
        return None
    return digest.hexdigest()


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
    output.write_work(SOURCE_LOSSES, frame, reuse.unique_part(reuse.part_id([owner, "not-converted"]), used))
    skipped.extend((name, "not converted: its session needs more memory than this run may use (see losses)")
                   for name in files)
    return {"session_key": owner, "bytes": size, "files": files, "error": error}


def _check_kept(out: Path, previous: dict, missing: set[str], kept: frozenset[str]) -> None:
    """Refuse a run that would have to convert again groups whose sources are gone (their batch's
    parts were removed by hand, or its rows cannot be told apart by group)."""
    lost = reuse.spread(previous.get("batches", []), missing) & kept
    if lost:
        raise OutputError(
            f"{out}: the part files holding {len(lost)} sessions whose sources are gone (such as {min(lost)}) are "
            "missing or do not match its _reuse.json, and those sessions cannot be converted again. Restore the "
            "output's files, or convert again with --prune to drop the sessions whose sources are gone."
        )


def _check_keepable(out: Path) -> None:
    """Refuse to replace an output of ours whose reuse state this version cannot read: the sessions
    it holds whose sources are gone could not be kept."""
    if state_unreadable(out):
        raise OutputError(
            f"{out}: is an asr-batch output whose _reuse.json is missing or was written by another version, so the "
            "sessions it holds whose sources are gone cannot be kept. Convert into a new --out, or convert again "
            "with --prune to rebuild it from the current inputs only."
        )


def _finalize(
    con: duckdb.DuckDBPyConnection, output: Output, run_frames: dict[str, list[pl.DataFrame]],
    sources_read: _SourceReads,
) -> tuple[dict[str, int], list[dict], list[dict], dict[str, int]]:
    # The final stage reads the batches' parts of the output and work tables (as views of their
    # Parquet files) and builds the final tables from them, in the order of the files' headers.
    sql_files = set(sql.names())
    targets = [t.name for t in TABLES if t.stage == "final" and t.name in sql_files] + list(MANIFEST_RELATIONS)
    batch_tables = {t.name: t.schema for t in TABLES if t.stage == "batch"}
    given = {**batch_tables, **{n: s for n, s in WORK_SCHEMAS.items() if n != SOURCE_LOSSES}}
    steps = sql.order(targets, given=given)
    for name in sorted({dep for step in steps for dep in sql.reads(step)} & set(given)):
        work = name not in batch_tables
        if output.has(name, work=work):
            con.read_parquet(output.glob(name, work=work)).create_view(name)
        else:  # no batch held a row of it
            con.register(name, given[name].empty_table())
    has_source_losses = output.has(SOURCE_LOSSES, work=True)
    source_losses = [output.glob(SOURCE_LOSSES, work=True)] if has_source_losses else []
    counts, built = {}, {}
    for name in steps:
        sql.materialize(con, name)
        if name in MANIFEST_RELATIONS:
            continue
        frame = con.table(name).pl()
        if name == "sessions":
            frame = sources_read.columns(frame)
        if name == "losses":
            # losses found at the source (absent blobs, hash mismatches, ...) beside those the tables show
            extra = [pl.read_parquet(source_losses)] if source_losses else []
            if extra:
                frame = pl.from_arrow(task.cast(TABLES_BY_NAME[name].schema, [frame, *extra])).sort(
                    "session_key", "category", "detail", nulls_last=False, maintain_order=True
                )
        built[name] = frame
        counts[name] = output.write(TABLES_BY_NAME[name], frame)
    # losses found at the source, by category (the Entire summary line)
    entire_losses = dict(sorted(
        built["losses"].filter(pl.col("category").str.starts_with("entire.")).group_by("category").len().iter_rows()
    ))
    for table in SOURCE_TABLES:
        if run_frames.get(table.name):
            counts[table.name] = output.write(table, _concat(table.schema, run_frames[table.name]))
    unassigned = [
        {
            "kind": kind,
            "field": field,
            "value": value,
            "references": {"leafUuid": leaf},
            "source": {"path": path, "position": position},
        }
        for kind, field, value, leaf, path, position in con.table("unassigned_facts").fetchall()
    ]
    absent = [
        {
            "kind": kind,
            "name": name,
            "session_key": session_key,
            "referenced_by": {"path": path, "position": position} if path else None,
            "status": "absent",
            "possible_causes": ["deleted_by_retention", "not_copied", "removed"],
        }
        for kind, name, session_key, path, position in con.table("absent_files").fetchall()
    ]
    return counts, unassigned, absent, entire_losses


def _version_key(version: str) -> tuple:
    # numeric parts in numeric order, before any text part ("2.1.9" < "2.1.10" < "2.1.x")
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in version.split("."))


def _manifest(
    found: Discovery,
    inputs: list[dict],
    skipped: list[tuple[str, str]],
    counts: dict[str, int],
    unassigned: list[dict],
    absent: list[dict],
    imports: list[entire_checkpoint.Import],
    source_losses: dict[str, int],
    summary: dict,
) -> dict:
    rejected = counts.get("rejects", 0)
    foreign = sum(1 for i in inputs if i["status"] == "foreign")
    report = {
        "usage_selection": claude_code.USAGE_SELECTION,
        "coverage": {
            **claude_code.COVERAGE,
            "versions_in_input": sorted({v for i in inputs for v in i.get("versions", [])}, key=_version_key),
        },
        "unassigned_facts": claude_code.UNASSIGNED,
        "retention": {"policy": claude_code.RETENTION, "absent_files": absent},
    }
    extra = {}
    if imports:
        report["entire"] = entire_checkpoint.EXPORT_REPORT
        extra["entire"] = {"repositories": [imp.summary for imp in imports], "source_losses": source_losses}
    return {
        "format": {"name": FORMAT_NAME, "version": FORMAT_VERSION},
        "producer": {"name": PRODUCER, "version": VERSION},
        "inputs": inputs,
        "skipped": _skipped(skipped),
        "tables": {t.name: counts.get(t.name, 0) for t in TABLES},
        "rejected_lines": rejected - foreign,
        "foreign_files": foreign,
        "losses": counts.get("losses", 0),
        "export_report": report,
        **extra,
        "reuse": summary,
        "_meta": {"com.anthropic.claude-code/unassigned": unassigned},
    }
