"""The rollouts of a Codex thread, and the history a rollout references instead of copying it.

A rollout file is identified by (thread, rollout ID) (reference codex-format.md §14.5,
`sources.codex.rollout_id`). A paginated file can start from a history it does not hold: its first
session_meta's `history_base {thread_id, end_ordinal_exclusive, end_byte_offset}` names a rollout
(`thread_id` is a rollout ID) and the point its history stops at (sql/batch/codex/codex_rollouts.sql).

- A **fork**'s history_base points into its parent's rollout (another thread). Its file holds no copy
  of the parent's lines, so nothing of the parent is in it: the reference is lineage, `inherits`
  (the parent's prefix referenced, not copied, as the Claude Code entry maps fork-context-ref), with
  `sessions.inherits_mode` referenced. Its `forked_from_id` stays the `forked_from` edge.
- **thread/revert** writes the thread's next rollout, `rollout-<ts>-<thread>_<rollout>.jsonl`, whose
  history_base points into the thread's previous rollout, which Codex leaves as it was. Both files are
  one session: its records are the first rollout's lines, then the next rollout's (`rollout_order`).
  The previous rollout's lines from the cut on were reverted: a branch the current thread no longer
  holds, kept as records with `records.status` reverted (as a withdrawn message keeps its record);
  the next rollout's first record has the last record before the cut as its logical parent. Usage of
  both counts: a reverted response was still spent, and the next rollout does not repeat the history.

The cut is `end_byte_offset`, the byte after the history's last line in the base file's plain bytes
(Codex reads the base up to there; `end_ordinal_exclusive` counts the same lines by ordinal, a field
Entire's copies drop). A rollout no later rollout of its thread continues from, but the thread's newest
one, was reverted whole.
"""

from __future__ import annotations

import polars as pl

from batch.schema.work import WORK_SCHEMAS

HISTORY_BASE = "session_meta.history_base"  # lineage_evidence.source of an inherits edge


def plan(files: pl.DataFrame) -> pl.DataFrame:
    """Per file of the batch (`file_idx`, `session_key`, `source_file`, `rollout` and the columns of
    sql/batch/codex/codex_rollouts.sql): `is_revert` (its history_base points into its own thread),
    `rollout_order` (its place among its thread's rollouts: 0 for the first, then each after the one it
    continues), `reverted_from` (the byte offset from which its lines were reverted, 0 for all; null
    for none) and `cut_at` (for a revert, where its history stops in the rollout it continues)."""
    rows = files.to_dicts()
    by_thread: dict[str, dict[str, dict]] = {}
    for row in sorted(rows, key=lambda r: (r["session_key"], r["source_file"])):
        by_thread.setdefault(row["session_key"], {}).setdefault(row["rollout"], row)  # copies: the first by name
    out = []
    for thread, rollouts in by_thread.items():
        base = {r: _revert_base(thread, row, rollouts) for r, row in rollouts.items()}
        depth = {r: _depth(r, base) for r in rollouts}
        order = {r: i for i, r in enumerate(sorted(rollouts, key=lambda r: (depth[r], rollouts[r]["source_file"])))}
        current = max(rollouts, key=lambda r: order[r])
        reverted: dict[str, int | None] = dict.fromkeys(rollouts, 0)
        step, seen = current, set()
        reverted[current] = None
        while base[step] is not None and base[step] in rollouts and step not in seen:
            seen.add(step)
            cut = rollouts[step]["base_end_byte_offset"]
            step = base[step]
            reverted[step] = cut  # null when the cut is not known: nothing is marked
        out += [
            {"session_key": thread, "rollout": r, "is_revert": base[r] is not None, "rollout_order": order[r],
             "reverted_from": reverted[r], "base_rollout": base[r]}
            for r in rollouts
        ]
    schema = {"session_key": pl.String, "rollout": pl.String, "is_revert": pl.Boolean, "rollout_order": pl.Int64,
              "reverted_from": pl.Int64, "base_rollout": pl.String}
    return files.join(pl.DataFrame(out, schema=schema), on=["session_key", "rollout"], how="left", maintain_order="left")


def _revert_base(thread: str, row: dict, rollouts: dict[str, dict]) -> str | None:
    """The rollout of its own thread that `row`'s history_base continues, else None. A base is of the
    thread when it is the thread's first rollout (its ID is the thread's) or another rollout of the
    batch's files of the thread, or when the thread is no fork (only a fork references another thread)."""
    base = row["base_rollout_id"]
    if base is None or base == row["rollout"]:
        return None
    return base if base == thread or base in rollouts or row["fork_parent_id"] is None else None


def _depth(rollout: str, base: dict[str, str | None]) -> int:
    """How many rollouts of the thread come before `rollout` (1 for a base that is not in the batch)."""
    depth, seen = 0, {rollout}
    while base.get(rollout) is not None:
        depth += 1
        rollout = base[rollout]
        if rollout in seen or rollout not in base:
            break
        seen.add(rollout)
    return depth


def mark(every: pl.DataFrame) -> pl.DataFrame:
    """The classified lines with `is_reverted` (a record of a branch a later rollout of its thread
    reverted) and `logical_parent_record_id` (on a revert rollout's first record: the last record of
    the rollout it continues before the cut)."""
    frame = every.with_columns(
        is_reverted=pl.col("is_record") & pl.col("reverted_from").is_not_null()
        & (pl.col("byte_offset") >= pl.col("reverted_from")),
    )
    reverts = frame.filter(pl.col("is_revert") & pl.col("is_record")).group_by("session_key", "rollout").agg(
        record_id=pl.col("record_id").sort_by("line").first(), base_rollout=pl.first("base_rollout"),
        cut=pl.first("base_end_byte_offset"),
    )
    if reverts.is_empty():
        return frame.with_columns(logical_parent_record_id=pl.lit(None, pl.String))
    kept = frame.filter(pl.col("is_record")).select(
        "session_key", base_rollout="rollout", base_record="record_id", base_line="line", base_offset="byte_offset",
    )
    parents = (
        reverts.join(kept, on=["session_key", "base_rollout"])
        .filter(pl.col("cut").is_null() | (pl.col("base_offset") < pl.col("cut")))
        .sort("base_line").group_by("record_id").agg(logical_parent_record_id=pl.col("base_record").last())
    )
    return frame.join(parents, on="record_id", how="left", maintain_order="left").with_columns(
        logical_parent_record_id=pl.when(pl.col("is_record")).then("logical_parent_record_id")
    )


def lineage_evidence(every: pl.DataFrame) -> pl.DataFrame:
    """A fork whose history is a reference into its parent's rollout (history_base of another thread):
    `inherits` the parent thread, its `forked_from_id` (the rollout ID names the parent's first rollout
    when there is none). The cut stays in sessions.meta, read by sql/final/lineage.sql."""
    first = every.filter(pl.col("base_rollout_id").is_not_null() & ~pl.col("is_revert")).group_by("file_idx").agg(
        pl.first("session_key"), pl.first("fork_parent_id"), pl.first("base_rollout_id"),
    )
    frame = first.select(
        child_session_key="session_key", relation=pl.lit("inherits"),
        parent_session_key=pl.coalesce("fork_parent_id", "base_rollout_id"), source=pl.lit(HISTORY_BASE),
    ).unique(maintain_order=True)
    target = pl.from_arrow(WORK_SCHEMAS["lineage_evidence"].empty_table())
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in target.schema.items() if name not in frame.columns]
    return frame.with_columns(missing).select(target.columns).cast(target.schema)


def session_streams(streams: pl.DataFrame, every: pl.DataFrame) -> pl.DataFrame:
    """Each session's row with the history its first rollout references in another thread, as the Claude
    Code entry maps fork-context-ref: `inherits_mode` referenced, `inherits_session_id` the parent thread."""
    refs = every.filter(
        pl.col("base_rollout_id").is_not_null() & ~pl.col("is_revert") & (pl.col("rollout_order") == 0)
    ).group_by("session_key").agg(
        _inherits=pl.coalesce("fork_parent_id", "base_rollout_id").sort_by("file_idx").first()
    )
    return streams.join(refs, on="session_key", how="left", maintain_order="left").with_columns(
        inherits_mode=pl.when(pl.col("_inherits").is_not_null()).then(pl.lit("referenced")).otherwise("inherits_mode"),
        inherits_session_id=pl.coalesce("_inherits", "inherits_session_id"),
    ).drop("_inherits")
