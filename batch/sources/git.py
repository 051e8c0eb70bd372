"""Git repositories as a source of bytes: detect, open, read blobs in-process.

Every object is read through libgit2 (pygit2) in this process: no `git` executable is needed
and no process is started per object. A blob that cannot be read (absent from a partial clone or
a mirror, pruned, corrupt) is reported as None, for the caller to declare as a loss.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pygit2

from batch.errors import SourceError

# Errors libgit2 raises for an object it cannot find or decode (pygit2's NotFoundError is a KeyError).
OBJECT_ERRORS = (KeyError, ValueError, pygit2.GitError)


def is_repository(path: Path) -> bool:
    """Tell whether `path` is itself a Git repository: a working tree root, a bare repository or a mirror.

    A folder inside a working tree is not one (its transcripts are read as files)."""
    try:
        found = pygit2.discover_repository(str(path))
    except (pygit2.GitError, OSError):
        return False
    if found is None:
        return False
    target = path.resolve()
    try:
        repo = pygit2.Repository(found)
    except pygit2.GitError:
        return False
    if Path(repo.path).resolve() == target:
        return True
    return repo.workdir is not None and Path(repo.workdir).resolve() == target


def open_repository(path: Path) -> pygit2.Repository:
    """Open the repository at `path` (working tree, its .git folder, bare repository or mirror)."""
    if not is_repository(path):
        raise SourceError(
            f"{path}: not a Git repository. Pass the root of a working tree, a bare repository or a mirror."
        )
    return pygit2.Repository(pygit2.discover_repository(str(path)))


def repository_name(repo: pygit2.Repository) -> str:
    """The name shown for a repository in provenance: its working tree folder, else its git folder."""
    folder = Path(repo.workdir) if repo.workdir else Path(repo.path)
    return folder.resolve().name


def blob_size(repo: pygit2.Repository, oid: pygit2.Oid) -> int | None:
    """Size in bytes of a blob from its header (not inflated), or None when it cannot be read."""
    try:
        return repo.odb.read_header(oid)[1]
    except OBJECT_ERRORS:
        return None


def read_blob(repo: pygit2.Repository, oid: pygit2.Oid) -> bytes | None:
    """The bytes of a blob, or None when it is absent or corrupt."""
    try:
        obj = repo[oid]
        if not isinstance(obj, pygit2.Blob):
            return None
        return obj.data
    except OBJECT_ERRORS:
        return None


def ref_names(repo: pygit2.Repository) -> list[str]:
    """Every reference name of the repository, sorted (symbolic ones such as HEAD excluded)."""
    names = []
    for name in repo.references:
        ref = repo.references.get(name)
        if ref is not None and ref.type == pygit2.enums.ReferenceType.DIRECT:
            names.append(name)
    return sorted(names)


def peel_commit(repo: pygit2.Repository, name: str) -> pygit2.Commit | None:
    """The commit a reference points to (through annotated tags), or None when it is not a commit."""
    try:
        obj = repo.references[name].peel(pygit2.Commit)
    except OBJECT_ERRORS:
        return None
    return obj if isinstance(obj, pygit2.Commit) else None


# Git's object types by number (libgit2's), as the output names them (git_objects.kind)
KINDS = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
TYPES = {kind: number for number, kind in KINDS.items()}


def raw_objects(
    repo: pygit2.Repository, roots: list[str], *, below: bool, known: set[str] = frozenset(),
) -> Iterator[tuple[str, str, bytes | None]]:
    """(ID, kind, bytes) of each object of `roots` and, with `below`, of everything it names down to blobs:
    a tag's target, a commit's tree (not its parents), a tree's entries. Each object once; an object the
    repository does not hold (a partial clone, a pruned blob) is passed over, as reading it would be.
    An object `known` comes with None for its bytes: a known blob is not read."""
    seen: set[str] = set()
    todo = [(oid, None) for oid in reversed(roots)]
    while todo:
        oid, kind = todo.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if kind == "blob" and oid in known:
            yield oid, kind, None
            continue
        try:
            number, data = repo.odb.read(pygit2.Oid(hex=oid))
            obj = repo[oid] if below and number != TYPES["blob"] else None
        except OBJECT_ERRORS:
            continue
        yield oid, KINDS[number], None if oid in known else data
        if isinstance(obj, pygit2.Tag):
            todo.append((str(obj.target), None))
        elif isinstance(obj, pygit2.Commit):
            todo.append((str(obj.tree_id), "tree"))
        elif isinstance(obj, pygit2.Tree):
            # a gitlink (a submodule's commit) names an object of another repository
            todo.extend((str(e.id), e.type_str) for e in reversed(list(obj)) if e.type_str != "commit")


def write_repository(path: Path, refs: list[tuple[str, str]], objects: Iterable[tuple[str, str, bytes]]) -> Path:
    """A bare repository at `path` holding `objects` (ID, kind, bytes) as loose objects and the
    references `refs` (name, ID); the commits whose parents it does not hold are listed as shallow,
    so that a walk of the history stops at them. Raise SourceError when an object's bytes do not
    give its ID."""
    repo = pygit2.init_repository(str(path), bare=True)
    commits = []
    for oid, kind, data in objects:
        if str(repo.odb.write(TYPES[kind], data)) != oid:
            raise SourceError(f"{path}: the object held as {oid} has other bytes; it cannot be written back.")
        if kind == "commit":
            commits.append(oid)
    for name, oid in refs:
        repo.references.create(name, oid, force=True)
    shallow = [c for c in commits if any(p not in repo for p in map(str, repo[c].parent_ids))]
    if shallow:
        (path / "shallow").write_text("".join(f"{c}\n" for c in sorted(shallow)), encoding="ascii")
    return path
