"""The output folder and its run folder: the one place that replaces or removes anything, the
reuse state, the lock of one run at a time, and the swap.

What is ours, and so what may ever be replaced or removed:
- a run folder `.<out>.asr-run-<hex>` beside the output, made by this process with a marker file
  on which the run holds a lock for as long as it lives;
- an output folder whose manifest says `format.name = asr` and `producer.name = asr-batch` and
  whose every entry is a name this writer writes (the manifest, the catalog, the marker, the reuse
  state `_reuse.json`, `part-NNNNN.parquet` and `part-<16 hex>.parquet` files in the table folders
  the manifest lists, and the same part files in `_work/<table>/`, the work tables an incremental
  run reads again).
An incremental run never changes the previous output: it hard-links (or copies) the part files it
reuses into the new run folder, which is swapped in as a whole.
Removal goes through `_remove_ours` alone: it unlinks only those names and removes folders only
once empty, so a file someone else put there survives any code path.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from batch.errors import OutputError
from batch.output import integrity
from batch.output import manifest as manifest_file
from batch.output.catalog import CATALOG, write_catalog
from batch.output.layout import MANIFEST, MARKER, PART_RE, RUN_INFIX, SPILL, STATE, TEMPORARY_RE, WORK
from batch.output.parts import PartWriter, copy_statement, link_or_copy
from batch.schema import TABLES, Table
from batch.schema.work import WORK_SCHEMAS
from batch.version import FORMAT_NAME, PRODUCER, VERSION

try:  # POSIX; elsewhere a run cannot tell a live run folder from a stale one and leaves both
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


class Output:
    """A run's output: written into a run folder beside `out`, swapped in by `commit`.

    A crash, a signal or a kill before `commit` leaves the previous output untouched.
    """

    def __init__(self, out: Path) -> None:
        self.out = out.resolve()
        _check_target(self.out)
        self.stale_removed = remove_stale_runs(self.out)
        self.tmp = self.out.with_name(f".{self.out.name}{RUN_INFIX}{uuid.uuid4().hex[:12]}")
        self.closed = False
        self._catalog_reused = False
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self.tmp.mkdir()
            self._lock = _hold_marker(self.tmp / MARKER)
        except OSError as exc:
            raise OutputError(f"{out}: cannot create the output folder ({exc.strerror}). Pass a writable --out.") from exc

    @property
    def spill(self) -> Path:
        """Where DuckDB may spill to disk during this run, and where the run spools what it would else
        hold per input file (`_spill/`, inside the run folder)."""
        return self.tmp / SPILL

    def _folder(self, table: str, work: bool) -> Path:
        return self.tmp / WORK / table if work else self.tmp / table

    def part(self, table: str, index: int | str, *, work: bool = False) -> Path:
        if self.closed:
            raise OutputError("the run was stopped; nothing more is written")
        folder = self._folder(table, work)
        if work:
            (self.tmp / WORK).mkdir(exist_ok=True)
        folder.mkdir(exist_ok=True)
        return folder / (f"part-{index:05d}.parquet" if isinstance(index, int) else f"part-{index}.parquet")

    def previous_manifest(self) -> dict:
        """The previous output's manifest, its values that grow with the archive (`inputs`, `_meta`,
        `files`, `export_report`) left as spans of its file, copied as they are when it is written again
        (batch/output/manifest.py)."""
        return manifest_file.read(self.out / MANIFEST, keep=manifest_file.GROWING)

    def recorded_files(self) -> integrity.Recorded:
        """Each part file of the previous output as its run recorded it (the manifest's `files`: size and
        SHA-256, batch/output/integrity.py), read when iterated; none when there is none or it was
        written before manifests recorded them."""
        return integrity.Recorded(self.out)

    def parts(self, part: str, tables: list[str], *, work: bool = False, previous: bool = False) -> list[str]:
        """The tables among `tables` that have a part named `part`, in this run's folder or the previous output."""
        root = self.out if previous else self.tmp
        folder = root / WORK if work else root
        return [t for t in tables if (folder / t / f"part-{part}.parquet").is_file()]

    def reuse(self, part: str, tables: list[str], work_tables: list[str]) -> None:
        """Hard-link (else copy) the previous output's parts named `part` into this run's folder.

        The previous output is only read: a link is a new name for the same bytes, and no part is
        ever written in place, so the previous output stays whole until the swap replaces it.
        """
        for names, work in ((tables, False), (work_tables, True)):
            for table in names:
                source = (self.out / WORK / table if work else self.out / table) / f"part-{part}.parquet"
                if source.is_symlink() or not source.is_file():
                    continue
                self.link(source, table, part, work=work)

    def reuse_whole(self) -> None:
        """Hard-link (else copy) every part of the previous output, its manifest and its catalog
        into this run's folder: the output as it is, to which a run adds (batch/incremental/upgrade.py)."""
        for names, work in (([t.name for t in TABLES], False), (list(WORK_SCHEMAS), True)):
            for table in names:
                folder = self.out / WORK / table if work else self.out / table
                for source in sorted(folder.glob("part-*.parquet")):
                    if PART_RE.match(source.name) and source.is_file() and not source.is_symlink():
                        self.link(source, table, source.stem.removeprefix("part-"), work=work)
        link_or_copy(self.out / MANIFEST, self.tmp / MANIFEST)
        self.reuse_catalog()

    def link(self, source: Path, table: str, part: str, *, work: bool = False) -> None:
        """Hard-link (else copy) the part file `source` of the previous output as this run's part `part` of `table`."""
        link_or_copy(source, self.part(table, part, work=work))

    def reuse_catalog(self) -> bool:
        """Hard-link (else copy) the previous output's catalog, when its tables are all reused; False
        when there is none to reuse (commit then builds it)."""
        source = self.out / CATALOG
        if source.is_symlink() or not source.is_file() or (self.out / (CATALOG + ".wal")).exists():
            return False
        link_or_copy(source, self.tmp / CATALOG)
        self._catalog_reused = True
        return True

    def files(self, table: str, *, work: bool = False, without: frozenset[str] = frozenset()) -> list[str]:
        """The part files of a table in this run's folder, but those of the part names `without`."""
        folder = self._folder(table, work)
        return [str(p) for p in sorted(folder.glob("*.parquet")) if p.stem.removeprefix("part-") not in without]

    def has(self, table: str, *, work: bool = False) -> bool:
        folder = self._folder(table, work)
        return folder.is_dir() and any(folder.iterdir())

    def write(self, table: Table, data: pl.DataFrame | pa.Table, index: int = 0) -> int:
        """Write one part of an output table in its declared schema (see `conform`); return the row count."""
        with self.open(table, index) as part:
            part.append(data)
        return part.rows

    def copy(self, con: duckdb.DuckDBPyConnection, table: Table, relation: str, index: int = 0) -> int:
        """Write one part of an output table from the DuckDB relation `relation`, by DuckDB itself
        (`copy_statement`); return the row count."""
        return con.execute(copy_statement(table, relation, self.part(table.name, index))).fetchall()[0][0]

    def open(self, table: Table, index: int = 0) -> PartWriter:
        """One part of an output table, written in pieces (`PartWriter.append`) until it is closed."""
        return PartWriter(self.part(table.name, index), table)

    def write_work(self, name: str, data: pl.DataFrame, index: int) -> None:
        """Write one part of an intermediate table used by the cross-batch steps."""
        data.write_parquet(self.part(name, index, work=True), compression="zstd")

    def write_manifest(self, manifest: dict) -> None:
        # written as it is encoded, its spans copied: the text of a manifest listing every input and
        # unassigned fact (90 MB at 8 GiB of archive) is never held whole, nor its pieces
        manifest_file.write(self.tmp / MANIFEST, manifest)

    def commit(
        self, manifest: dict | None = None, known: Iterable[tuple[str, list]] = (), *,
        overrides: pl.DataFrame | None = None, memory: int | None = None,
    ) -> None:
        """Drop intermediates, fill empty tables, write `manifest` with every part file's size and
        SHA-256 (`files`: `known` gives those of the parts taken intact from the previous output, see
        batch/output/integrity.py), build the catalog (the previous one when it was reused and no
        price file's rows, `overrides`, are given; its stored views within `memory`, `CATALOG_MEMORY` by
        default), and swap the new output in.

        The new output is complete, catalog included, before the swap. On Linux the swap is one
        atomic exchange of the two folders (renameat2 RENAME_EXCHANGE); elsewhere it is two
        renames, and a kill between them leaves both outputs beside `out` under run folders' names,
        the next run making the new one `out` again (`finish_interrupted_swap`; docs/asr-tables.md,
        "What a run replaces").
        """
        _remove_temporaries(self.tmp)  # left by tasks whose worker died: converted again since
        for table in TABLES:
            if not self.has(table.name):
                self.write(table, table.schema.empty_table())
        if manifest is not None:
            self.spill.mkdir(exist_ok=True)
            files = manifest_file.write_object(self.spill / "files.json", integrity.seal(self.tmp, self.out, known))
            self.write_manifest({**manifest, "files": files})
        if overrides is not None or not self._catalog_reused:
            write_catalog(self.tmp, self.out, overrides=overrides, memory=memory)
        # the work tables stay: an incremental run reads those of the batches it reuses
        _remove_ours(self.tmp, spill=True, within=SPILL)
        if self.out.exists():
            _check_target(self.out)  # still ours: nothing of someone else's was put there meanwhile
            _swap(self.tmp, self.out)
            # self.tmp now holds the previous output
            _remove_ours(self.tmp, tables=_listed_tables(self.tmp), work=True)
        else:
            _rename_new(self.tmp, self.out)
        self.closed = True
        self._release()

    def abort(self) -> None:
        """Stop writing and remove the run folder (only what this run wrote in it)."""
        self.closed = True
        _remove_ours(self.tmp, work=True, spill=True)
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def check_apart(roots: list[Path], out: Path) -> None:
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


def _remove_temporaries(folder: Path) -> None:
    """Remove the temporary part files (`TEMPORARY_RE`) in the table folders of a run folder."""
    for path in [*folder.glob("*/.part-*"), *folder.glob(f"{WORK}/*/.part-*")]:
        if TEMPORARY_RE.match(path.name) and not path.is_symlink():
            path.unlink()


def is_ours(out: Path) -> bool:
    """Whether `out` is an asr-batch output (its manifest lists the tables it holds); only reads."""
    try:
        return _manifest_tables(out.resolve()) is not None
    except (OSError, RuntimeError):  # RuntimeError: a symbolic link loop
        return False


LOCK_SUFFIX = ".asr-lock"


@contextlib.contextmanager
def lock_output(out: Path, warn=None):
    """Hold the lock of the output folder `out` for a whole run: a file `.<out>.asr-lock` beside
    it, locked with flock (the folder itself is swapped, so it cannot hold the lock), removed at
    the end. A second run on the same output waits until the first has swapped its output in
    (`warn` says so), then reads that output: no run's update is lost."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    out = out.resolve()
    path = out.with_name(f".{out.name}{LOCK_SUFFIX}")
    told = False
    while True:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"{out}: cannot create its lock file {path} ({exc.strerror}). Pass a writable --out.") from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                if warn and not told:
                    warn(f"another asr-batch run ({holder}) is writing {out}; waiting for it to finish.")
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            # the file we locked is still the one at `path` (a run that ended removed its own)
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                break
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)  # closing the file releases the lock


def _hold_marker(path: Path) -> int | None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, json.dumps({"producer": PRODUCER, "version": VERSION, "pid": os.getpid()}).encode() + b"\n")
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _is_live(marker: Path) -> bool:
    """Whether a running process holds the lock on a run folder's marker."""
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fd = os.open(marker, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _run_folders(out: Path) -> list[Path]:
    """The entries beside `out` named as its run folders are (none when its parent cannot be listed)."""
    prefix = f".{out.name}{RUN_INFIX}"
    try:
        return [p for p in out.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return []


def finish_interrupted_swap(out: Path) -> Path | None:
    """Where `out` is missing and run folders of it hold complete outputs (a manifest, a catalog, no
    live run), the swap of a run killed between its two renames (`_swap` without the atomic
    exchange) is finished: the newest of them (by its manifest's time) becomes `out` again, so that
    the next run reads it as the previous output instead of starting anew; the others are left
    for `remove_stale_runs`. Returns the folder renamed, None when there was nothing to finish."""
    if out.exists() or out.is_symlink():
        return None
    complete = []
    for folder in _run_folders(out):
        marker, manifest = folder / MARKER, folder / MANIFEST
        if folder.is_symlink() or not folder.is_dir() or not (folder / CATALOG).is_file():
            continue
        if marker.is_file() and _is_live(marker):
            continue
        if _manifest_tables(folder) is not None:
            complete.append((manifest.stat().st_mtime_ns, folder.name, folder))
    if not complete:
        return None
    folder = max(complete)[2]
    os.replace(folder, out)
    return folder


def remove_stale_runs(out: Path) -> int:
    """Remove run folders of `out` left by a killed run: ours by name and by marker or manifest."""
    removed = 0
    for folder in sorted(_run_folders(out)):
        if folder.is_symlink() or not folder.is_dir():
            continue
        marker = folder / MARKER
        if marker.is_file() and not marker.is_symlink():
            if _is_live(marker):
                continue
        elif _manifest_tables(folder) is None:
            continue
        _remove_ours(folder, tables=_listed_tables(folder), work=True, spill=True)
        removed += 1
    return removed


def _manifest_tables(folder: Path) -> list[str] | None:
    """The table folders an asr-batch manifest in `folder` lists, or None when it is not ours."""
    path = folder / MANIFEST
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with path.open("rb") as fh:
            # a file read before, unchanged since (same inode, size, modification and change times),
            # is not read again
            key = _identity(fh)
        if key not in _READ_MANIFESTS:
            _READ_MANIFESTS.clear()
            _READ_MANIFESTS[key] = _ours(manifest_file.read_keys(path, ("format", "producer", "tables")))
    except (OSError, ValueError):
        return None
    tables = _READ_MANIFESTS[key]
    return None if tables is None else list(tables)


def manifest_of(folder: Path) -> dict | None:
    """The manifest of the asr-batch output `folder` (None when it is not ours), its unassigned facts,
    part files and report left as spans of the file (`_meta`, `files`, `export_report`: no source reads
    them); only reads."""
    try:
        if _manifest_tables(folder) is None:
            return None
        return manifest_file.read(folder / MANIFEST, keep=("_meta", "files", "export_report"))
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symbolic link loop
        return None


def manifest_keys(folder: Path, keys: tuple[str, ...]) -> dict | None:
    """The values of `keys` in the manifest of the asr-batch output `folder` (None when it is not ours)."""
    try:
        if _manifest_tables(folder) is None:
            return None
        return manifest_file.read_keys(folder / MANIFEST, keys)
    except (OSError, RuntimeError, ValueError):
        return None


def _identity(fh) -> tuple:
    """An open file's identity: device, inode, size, modification and change times."""
    st = os.fstat(fh.fileno())
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


# the table list `_manifest_tables` found in the manifest file read last, by its identity
_READ_MANIFESTS: dict[tuple, list[str] | None] = {}


def _ours(manifest: object) -> list[str] | None:
    if not isinstance(manifest, dict):
        return None
    fmt, producer, tables = manifest.get("format"), manifest.get("producer"), manifest.get("tables")
    if not (
        isinstance(fmt, dict) and fmt.get("name") == FORMAT_NAME
        and isinstance(producer, dict) and producer.get("name") == PRODUCER
        and isinstance(tables, dict) and all(isinstance(t, str) and _plain_name(t) for t in tables)
    ):
        return None
    return list(tables)


def _listed_tables(folder: Path) -> list[str]:
    return _manifest_tables(folder) or []


def _plain_name(name: str) -> bool:
    return bool(re.fullmatch(r"[a-z_][a-z0-9_]*", name))


def _expected(rel: tuple[str, ...], is_dir: bool, tables: set[str], work: bool, spill: bool) -> bool:
    """Whether the entry at relative path `rel` is one this writer writes."""
    top = rel[0]
    if len(rel) == 1:
        if is_dir:
            return top in tables or (work and top == WORK) or (spill and top == SPILL)
        return top in (MANIFEST, MARKER, CATALOG, CATALOG + ".wal", STATE)
    if top == SPILL:
        return spill  # DuckDB's own temporary files, in a folder only this run uses
    if top == WORK:
        return work and (len(rel) == 2 and is_dir and _plain_name(rel[1]) or len(rel) == 3 and not is_dir and _part_name(rel[2]))
    return top in tables and len(rel) == 2 and not is_dir and _part_name(rel[1])


def _part_name(name: str) -> bool:
    return bool(PART_RE.match(name) or TEMPORARY_RE.match(name))


def foreign_entries(folder: Path, *, tables: list[str], work: bool = False, spill: bool = False) -> list[str]:
    """Entries under `folder` that this writer would not have written (relative paths)."""
    found: list[str] = []
    known = set(tables)

    def visit(path: Path, rel: tuple[str, ...]) -> None:
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            found.append("/".join(rel) or ".")
            return
        for entry in entries:
            sub = (*rel, entry.name)
            is_dir = entry.is_dir(follow_symlinks=False)
            if entry.is_symlink() or not _expected(sub, is_dir, known, work, spill):
                found.append("/".join(sub))
            elif is_dir:
                visit(Path(entry.path), sub)

    visit(folder, ())
    return found


def _remove_ours(
    folder: Path, *, tables: list[str] | tuple[str, ...] = (), work: bool = False, spill: bool = False,
    within: str | None = None,
) -> None:
    """Remove what this writer writes under `folder` (or only its subfolder `within`), then each
    folder that is left empty.

    `tables` names the table folders that may be removed (besides every current table); `work`
    and `spill` allow the run's intermediates. Anything else is left where it is.
    """
    start, rel = (folder / within, (within,)) if within else (folder, ())
    if not start.is_dir() or start.is_symlink():
        return
    known = set(tables) | {t.name for t in TABLES}

    def visit(path: Path, rel: tuple[str, ...]) -> None:
        try:
            entries = list(os.scandir(path))
        except OSError:
            return
        for entry in entries:
            sub = (*rel, entry.name)
            is_dir = entry.is_dir(follow_symlinks=False)
            if entry.is_symlink() or not _expected(sub, is_dir, known, work, spill):
                continue
            if is_dir:
                visit(Path(entry.path), sub)
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)  # only once empty
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)

    visit(start, rel)
    with contextlib.suppress(OSError):
        os.rmdir(start)


def _check_target(out: Path) -> None:
    if out.is_symlink() and not out.exists():
        raise OutputError(f"{out}: is a broken symbolic link. Pass a folder path to --out.")
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: exists and is not a folder. Pass a folder path to --out.")
    if out.is_dir():
        try:
            empty = not any(out.iterdir())
        except OSError as exc:
            raise OutputError(f"{out}: cannot be read ({exc.strerror}). Pass a folder you can write to --out.") from exc
        if not empty:
            tables = _manifest_tables(out)
            if tables is None:
                raise OutputError(
                    f"{out}: is a non-empty folder that is not an asr-batch output (it has no manifest.json "
                    "written by asr-batch). Pass an empty or new folder to --out, so nothing of yours is replaced."
                )
            foreign = foreign_entries(out, tables=tables, work=True)
            if foreign:
                listed = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
                raise OutputError(
                    f"{out}: is an asr-batch output that also holds files asr-batch did not write ({listed}). "
                    "Move them elsewhere or pass another --out; nothing was changed."
                )
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise OutputError(f"{out}: cannot write in {parent}. Pass a writable --out.")


# Atomic folder swap: Linux renameat2(2). Elsewhere (or on a file system that refuses the flags) two renames.
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """Rename with renameat2 flags; False when this system or file system does not offer them."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(libc, "renameat2", None)
    if call is None:
        return False
    if call(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(src), None, str(dst))


def _swap(new: Path, out: Path) -> None:
    """Exchange `new` and `out`: afterwards `out` is the new output and `new` the previous one."""
    if _renameat2(new, out, _RENAME_EXCHANGE):
        return
    aside = _move_aside(out)
    os.replace(new, out)
    os.replace(aside, new)


def _move_aside(out: Path) -> Path:
    """Rename `out` to a run folder's name beside it; return that name."""
    aside = out.with_name(f".{out.name}{RUN_INFIX}{uuid.uuid4().hex[:12]}")
    os.replace(out, aside)
    return aside


def _rename_new(new: Path, out: Path) -> None:
    try:
        if _renameat2(new, out, _RENAME_NOREPLACE):
            return
    except FileExistsError as exc:
        raise OutputError(f"{out}: was created by someone else during the run. Convert again.") from exc
    if out.exists():
        raise OutputError(f"{out}: was created by someone else during the run. Convert again.")
    os.replace(new, out)
