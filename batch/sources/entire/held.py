"""What an output holds of a repository's Entire storage, and the repository rebuilt from it.

So that a later asr-batch converts a repository's sessions again when the repository is gone (an
upgrade, an output converted into a new folder; docs/asr-tables.md, "An output is a source"), each
run that reads a repository writes what its checkpoint scan, its session loads and its trailer walk
read, as Git stores it (batch/schema/entire.py): the references the scan reads with the objects they
name (`git_refs`), and the objects verbatim, each its kind and bytes, so each keeps its ID
(`git_objects`): everything under those references down to blobs, each commit without its history,
and the commits of the code history whose message names a checkpoint; a run whose references moved
reads only the blobs the output does not hold yet (run/finalize.py `write_held`). `rebuild` writes
them back as a bare repository of the same name, whose commits without parents are shallow;
discovery reads it as it read the original (formats/entire_checkpoint.py `discover`), and its rows
are the same.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pygit2

from batch.schema.entire import GIT_OBJECTS, GIT_REFS
from batch.sources.entire import scan, scan_v2
from batch.sources.git import raw_objects, ref_names, write_repository

STORAGE, TRAILER = "storage", "trailer"
# the bytes of objects in one piece of git_objects (a row group)
PIECE_BYTES = 16 << 20


def storage_refs(repo: pygit2.Repository) -> list[tuple[str, str]]:
    """The references the checkpoint scan reads (scan.py: the layouts', the v2 refs), with the object each names."""
    refs = []
    for name in ref_names(repo):
        if scan_v2.claims(name) or any(layout.claims(name) for layout in scan.LAYOUTS):
            refs.append((name, str(repo.references[name].target)))
    return refs


def refs_table(repository: str, refs: list[tuple[str, str]]) -> pa.Table:
    return pa.table({
        "repository": [repository] * len(refs), "ref": [r for r, _ in refs], "object_id": [o for _, o in refs],
    }, schema=GIT_REFS.schema)


def object_pieces(
    path: Path, repository: str, trailers: list[str], known: set[str] = frozenset(), kept: set[str] | None = None,
) -> Iterator[pa.Table]:
    """The rows of git_objects for the repository at `path` (named `repository`), a piece of about
    PIECE_BYTES at a time: what its storage references name, then the `trailers` commits; but the
    objects `known` (held already), whose IDs go to `kept` instead, their blobs not read."""
    repo = pygit2.Repository(str(path))
    rows: dict[str, list] = {c: [] for c in GIT_OBJECTS.schema.names}
    size = 0
    held = set()
    kept = set() if kept is None else kept
    found = [(STORAGE, raw_objects(repo, [oid for _, oid in storage_refs(repo)], below=True, known=known)),
             (TRAILER, raw_objects(repo, trailers, below=False, known=known))]
    for read_as, objects in found:
        for oid, kind, data in objects:
            if oid in held:  # a trailer commit that is also storage
                continue
            held.add(oid)
            if data is None:
                kept.add(oid)
                continue
            for column, value in zip(rows, (repository, oid, kind, read_as, data)):
                rows[column].append(value)
            size += len(data)
            if size >= PIECE_BYTES:
                yield pa.table(rows, schema=GIT_OBJECTS.schema)
                rows, size = {c: [] for c in rows}, 0
    if rows["object_id"]:
        yield pa.table(rows, schema=GIT_OBJECTS.schema)


def held_repositories(folder: Path, damaged: set[str] = frozenset()) -> set[str]:
    """The repositories whose storage the output `folder` holds whole (both parts of each intact)."""
    parts = _parts(folder, damaged)
    if not parts:
        return set()
    return set(ds.dataset([str(folder / GIT_REFS.name / p) for p in parts], format="parquet")
               .to_table(columns=["repository"])["repository"].to_pylist())


def rebuild(folder: Path, repository: str, into: Path, damaged: set[str] = frozenset()) -> Path:
    """The repository `repository` as the output `folder` holds it, written as a bare repository
    `into`/`repository` (its name is the repository's name in the rows)."""
    wanted = ds.field("repository") == repository
    parts = _parts(folder, damaged)
    refs = ds.dataset([str(folder / GIT_REFS.name / p) for p in parts], format="parquet").to_table(filter=wanted)
    objects = ds.dataset([str(folder / GIT_OBJECTS.name / p) for p in parts], format="parquet")

    def rows() -> Iterator[tuple[str, str, bytes]]:
        for piece in objects.to_batches(columns=["object_id", "kind", "data"], filter=wanted, batch_size=256):
            yield from zip(*(piece.column(c).to_pylist() for c in ("object_id", "kind", "data")))

    pairs = list(zip(refs["ref"].to_pylist(), refs["object_id"].to_pylist()))
    trailers = objects.to_table(columns=["object_id"], filter=wanted & (ds.field("read_as") == TRAILER))
    # the trailer walk reads the code branches: each trailer commit is the tip of one
    pairs += [(f"refs/heads/{TRAILER}/{oid}", oid) for oid in trailers["object_id"].to_pylist()]
    return write_repository(into / repository, pairs, rows())


def workspace(owner: object) -> Path:
    """A temporary folder for rebuilt repositories, removed with `owner` (when the run is done with it)."""
    path = Path(tempfile.mkdtemp(prefix="asr-batch-git-"))
    weakref.finalize(owner, shutil.rmtree, path, ignore_errors=True)
    return path


def _parts(folder: Path, damaged: set[str]) -> list[str]:
    """The names of the parts (one per repository) held whole (`intact`)."""
    return [p.name for p in sorted((folder / GIT_REFS.name).glob("part-*.parquet")) if intact(folder, p.name, damaged)]


def intact(folder: Path, name: str, damaged: set[str] = frozenset()) -> bool:
    """Whether the part `name` of a repository is whole in the output `folder`: in both tables, neither
    file `damaged` nor without its Parquet footer (truncated)."""
    for table in (GIT_REFS.name, GIT_OBJECTS.name):
        path = folder / table / name
        if not path.is_file() or path.is_symlink() or f"{table}/{name}" in damaged:
            return False
        try:
            pq.read_metadata(path)
        except (OSError, pa.ArrowException):
            return False
    return True
