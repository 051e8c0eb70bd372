"""Session groups an earlier output holds without the bytes they were converted from, carried forward
as that output wrote them (docs/asr-tables.md, "An output is a source").

An output read as a source gives its groups again by rebuilding their files (sources/archive.py). A
group it holds only in part cannot be rebuilt: a session read from Git by a version that kept no copy
of the repository's objects (0.3.0 and earlier), a Codex session of an Entire checkpoint that versions
before the Codex converter held as metadata only, a checkpoint no longer under the references the
output holds. Such a group, when no input gives it, keeps the rows that output wrote: each table's
rows of its sessions, with this version's columns (a column that version did not write is null),
written as one batch part of its own (`Batch.written_by` names the version), its `sessions` rows
with `source_present` false. The final stage does not read these parts (their final tables' rows are
among them), and later runs keep the batch as they keep any group whose source is gone; a run given
the group's source again converts it and drops the batch. The run-level rows of the checkpoint
tables (`final.RUN_ROW_KEYS`) are kept from the earlier output as from a previous output of this
version (`final.keep_run_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

import duckdb
import polars as pl

from batch import reuse, sql
from batch.errors import OutputError
from batch.incremental.state import Batch
from batch.output.folder import Output, manifest_keys
from batch.output.layout import WORK
from batch.output.parts import copy_statement
from batch.run import finalize as final
from batch.schema import TABLES
from batch.sources import archive, registry
from batch.sources.base import fingerprint_entries, fingerprint_text

# the tables whose rows a group's sessions own: the batch and final tables but the checkpoint
# tables sources fill once per run (kept by their own keys: `final.keep_run_rows`)
TABLES_OWNED = [t for t in TABLES if t.stage in ("batch", "final") and t.name not in {x.name for x in registry.RUN_TABLES}]
SOURCE_LOSSES = "source_losses"  # the scans' losses of the final `losses`, kept as run-level rows


@dataclass(frozen=True)
class Group:
    """A session group an earlier output holds without its bytes, to be carried as it wrote it."""

    arch: archive.Archive
    owner: str  # the group's main session key
    keys: tuple[str, ...]  # its sessions' keys
    inputs: tuple[dict, ...]  # the output's manifest entries of its files (none for a session of metadata only)
    last_read: str | None  # when that output's runs last read its source
    written_by: str  # the version that wrote its rows (that output's, or the one it carried them from)

    @property
    def fingerprint(self) -> str:
        """As the state records it: per file, name, size and recorded SHA-256 (those of files rebuilt
        from an output): no input file gives it again by that name."""
        return fingerprint_text([i["path"], i.get("size"), i.get("sha256")] for i in self.inputs)


def find(inputs: registry.Inputs, held: set[str]) -> list[Group]:
    """The groups of the earlier outputs among `inputs` that no unit gives (neither a file or
    repository given, nor a file rebuilt from an output), that the previous output does not hold
    (`held`: its groups, when this version wrote it) and none of whose files a unit reads: every
    session of those outputs is then in the new output, converted or as written. An output named
    first wins over the next, as for rebuilt groups."""
    if not inputs.archives:
        return []
    given = {u.owner for u in inputs.units} | held
    files = {e[0] for u in inputs.units for e in fingerprint_entries(u.fingerprint) if len(e) in (3, 4)}
    found = []
    for arch in inputs.archives:
        manifest = manifest_keys(arch.root, ("inputs", "as_written")) or {}
        inputs_of = [i for i in manifest.get("inputs", []) if isinstance(i, dict) and isinstance(i.get("path"), str)]
        writers = {e.get("session_group"): e.get("written_by") for e in manifest.get("as_written") or []
                   if isinstance(e, dict)}
        for owner, (keys, sources, last_read) in sorted(_groups(arch).items()):
            if owner in given or sources & files:
                continue
            entries = tuple(i for i in inputs_of if i.get("session_key") in keys)
            written_by = writers.get(owner) if isinstance(writers.get(owner), str) else str(arch.written)
            found.append(Group(arch, owner, tuple(sorted(keys)), entries, last_read, written_by))
            given.add(owner)
    return found


def write(output: Output, groups: list[Group], used: set[str]) -> list[Batch]:
    """Write the rows each group's output holds of it as one part of each table that has some, reading
    each table of an output once for all its groups; return their state entries. An output whose parts
    cannot be read is refused, nothing changed."""
    parts = {g.owner: reuse.unique_part(reuse.part_id([f"as-written:{g.owner}"]), used) for g in groups}
    counts: dict[str, dict[str, int]] = {g.owner: {} for g in groups}
    for root in dict.fromkeys(g.arch.root for g in groups):
        mine = [g for g in groups if g.arch.root == root]
        con = duckdb.connect()
        try:
            con.register("wanted", pl.DataFrame({"owner": [g.owner for g in mine]}))
            con.register("group_files", pl.DataFrame(
                [(i["path"], g.owner) for g in mine for i in g.inputs], schema={"path": pl.String, "owner": pl.String},
                orient="row"))
            for table in TABLES_OWNED:
                if not _select(con, mine[0].arch, table):
                    continue
                written = dict(con.execute("select owner, count(*) from rows group by owner").fetchall())
                for g in mine:
                    if written.get(g.owner):
                        path = output.part(table.name, parts[g.owner])
                        con.execute(copy_statement(table, f"rows where owner = {sql.quote(g.owner)}", path))
                        counts[g.owner][table.name] = written[g.owner]
        except (duckdb.Error, OSError) as exc:
            raise OutputError(
                f"{root}: written by {mine[0].arch.written}, holds {len(mine)} session groups without the bytes they "
                f"were converted from (e.g. {mine[0].owner}), and its tables cannot be read ({exc}): give their sources "
                "again, or pass --prune to drop them; nothing was changed."
            ) from exc
        finally:
            con.close()
    return [Batch(parts[g.owner], {g.owner: g.fingerprint}, g.inputs, (), counts[g.owner], written_by=g.written_by)
            for g in groups]


def manifest_entries(batches: list[Batch]) -> list[dict]:
    """The manifest's `as_written`: each group whose rows are an earlier version's, and which."""
    return [
        {"session_group": owner, "written_by": b.written_by, "inputs": [i["path"] for i in b.inputs]}
        for b in batches if b.written_by for owner in b.groups
    ]


def _select(con: duckdb.DuckDBPyConnection, arch: archive.Archive, table) -> bool:
    """Make `rows` the rows the output `arch` holds of the groups `wanted` in `table`, with this
    version's columns (those it lacks null) and their group (`owner`); False when it has no part of
    the table, or none a group's rows can be told in."""
    files = [f for f in archive.part_files(arch.root, table.name, arch.damaged) if Path(f).name != final.RUN_PART]
    if not files:
        return False
    con.execute(f"create or replace temp view old as select * from read_parquet({_list(files)}, union_by_name = true)")
    have = {row[0] for row in con.execute("describe old").fetchall()}
    if "session_key" in have:  # a group's sessions: its main session's key, and the keys nested in it
        of = ("join wanted as w on split_part(o.session_key, '/', 1) = split_part(w.owner, '/', 1) "
              "and (o.session_key = w.owner or starts_with(o.session_key, w.owner || '/'))")
    elif "source_file" in have:
        of = "join group_files as w on o.source_file = w.path"
    else:
        return False
    columns = ", ".join(
        "false as source_present" if (table.name, f.name) == ("sessions", "source_present")
        else f'o."{f.name}"' if f.name in have else f'null as "{f.name}"'
        for f in table.schema
    )
    rows = f"select {columns}, w.owner from old as o {of}"
    if table.name == "losses":  # the scans' run-level losses, kept by their own keys (`run_rows`)
        losses = [f for f in archive.part_files(arch.root, f"{WORK}/{SOURCE_LOSSES}", arch.damaged) if Path(f).name == final.RUN_PART]
        if losses:
            rows += (f" except all select {columns}, w.owner from read_parquet({_list(losses)}, union_by_name = true)"
                     f" as o {of}")
    con.execute(f"create or replace temp table rows as {rows}")
    return True


def _groups(arch: archive.Archive) -> dict[str, tuple[set[str], set[str], str | None]]:
    """Each group of the output's `sessions` with its session keys, the files they were read from and
    when it was last read. A main session's key names its group; another session is of the group
    whose main session its key is nested in (`<owner>/...`), else of its key's first segment."""
    files = archive.part_files(arch.root, "sessions", arch.damaged)
    if not files:
        return {}
    con = duckdb.connect()
    try:
        have = {row[0] for row in con.execute(f"describe select * from read_parquet({_list(files)}, union_by_name = true)").fetchall()}
        optional = ", ".join(c if c in have else f"null as {c}" for c in ("source_files", "source_last_read_at"))
        rows = con.execute(
            f"select session_key, stream_kind, {optional} from read_parquet({_list(files)}, union_by_name = true) "
            "where session_key is not null order by session_key"
        ).fetchall()
    except duckdb.Error as exc:
        raise OutputError(f"{arch.root}: its sessions table cannot be read ({exc}); nothing was changed.") from exc
    finally:
        con.close()
    mains = {key for key, kind, *_ in rows if kind == "main"}
    groups: dict[str, tuple[set[str], set[str], str | None]] = {}
    for key, _, sources, read_at in rows:
        owner = key if key in mains else next(
            (key[:i] for i in range(len(key)) if key[i] == "/" and key[:i] in mains), key.split("/", 1)[0])
        keys, paths, last = groups.setdefault(owner, (set(), set(), None))
        keys.add(key)
        paths.update(sources or ())
        at = None if read_at is None else read_at.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        groups[owner] = (keys, paths, max(filter(None, (last, at)), default=None))
    reads = archive.state_reads(arch.root)
    return {o: (k, p, archive.read_at(reads.get(o)) or last) for o, (k, p, last) in groups.items()}


def _list(files: list[str]) -> str:
    return "[" + ", ".join(sql.quote(f) for f in files) + "]"


def run_rows(groups: list[Group], read: set[str]) -> dict[str, pl.DataFrame]:
    """The run-level rows the groups' outputs hold (`final.run_rows`): of an output none of whose
    repositories this run reads (`read`: given, or rebuilt from an output's copy), all of them, the
    scans' rows of those repositories (trailers naming a checkpoint the repository lacks included);
    else those of the checkpoints the groups' sessions were read from, the trailers naming them, and
    the scans' losses of those sessions and checkpoints."""
    found: dict[str, list[pl.DataFrame]] = {}
    for root in dict.fromkeys(g.arch.root for g in groups):
        rows = final.run_rows(root)
        repositories = {r.get("repository") for r in ((manifest_keys(root, ("entire",)) or {}).get("entire") or {}).get(
            "repositories", []) if isinstance(r, dict)}
        if not repositories & read:
            for name, frame in rows.items():
                found.setdefault(name, []).append(frame)
            continue
        keys = [k for g in groups if g.arch.root == root for k in g.keys]
        sessions = rows.get("checkpoint_sessions")
        ids = [] if sessions is None else sessions.filter(pl.col("session_key").is_in(keys))["checkpoint_id"].unique().to_list()
        commits = rows["checkpoint_commits"].filter(pl.col("checkpoint_id").is_in(ids))["commit_id"] \
            if "checkpoint_commits" in rows else []
        of = {
            "checkpoint_sessions": pl.col("session_key").is_in(keys),
            "checkpoints": pl.col("checkpoint_id").is_in(ids),
            "checkpoint_commits": pl.col("checkpoint_id").is_in(ids),
            "vcs_events": pl.col("session_key").is_in(keys) | pl.col("commit_id").is_in(commits),
            "losses": pl.col("session_key").is_in(keys) | pl.any_horizontal(
                pl.lit(False), *(pl.col("detail").str.starts_with(f"checkpoint {i}") for i in ids)),
        }
        for name, frame in rows.items():
            found.setdefault(name, []).append(frame.filter(of[name]))
    return {name: pl.concat(frames) for name, frames in found.items() if sum(f.height for f in frames)}
