"""`asr-batch convert --watch`: convert again whenever the sources change, until stopped.

The watcher is watchfiles (the OS's file notifications through the Rust notify crate; polling
where the platform gives none). Changes are debounced: an update starts WATCH_QUIET_MS after the
last change, or WATCH_DEBOUNCE_MS after the first one when changes never stop (a live session
appends a line every few seconds). Each update is an ordinary incremental `convert`: it swaps its
output in at once, so the output stays queryable throughout, and a failed update leaves the
previous output in place and the watch goes on. A signal (Ctrl-C, SIGTERM) stops the watch
between or during updates; the last complete output stays.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from batch.errors import BatchError, Interrupted

# An update starts this long after the last change...
WATCH_QUIET_MS = 2_000
# ...or this long after the first one, when the changes go on.
WATCH_DEBOUNCE_MS = 30_000


def watched(paths: list[Path]) -> list[Path]:
    """What to watch for `paths`: a folder (a Git working tree's .git folder, where Entire's refs
    change), a file itself; a path that does not exist is left out."""
    found = []
    for path in paths:
        path = path.resolve()
        if path.is_dir():
            folder = path / ".git" if (path / ".git").is_dir() else path
        elif path.is_file():
            folder = path  # the file itself: its folder may be a whole home directory
        else:
            continue
        if folder.is_dir() and folder not in found:
            found.append(folder)
    return found


def watch_and_convert(
    paths: list[Path], run: Callable[[], object], *, echo: Callable[[str], None], quiet: bool = False,
    stopped: Callable[[], bool] = lambda: False, first: Callable[[], object] | None = None,
) -> None:
    """Run `first` (the first conversion), then `run` (an incremental convert) after each
    debounced change under `paths`, printing one line per update, until a signal stops it
    (`Interrupted`, or an error raised while `stopped()`). The watcher starts before `first`, so a
    change made while it converts is converted next."""
    folders = watched(paths)
    if not folders:
        if first is not None:
            first()  # says what is wrong with the sources, if anything is
        raise BatchError("--watch: none of the sources is a folder or a file that exists; nothing to watch.")
    changes = _changes(folders)
    started_watching = False
    try:
        next(changes)  # the watcher is watching
        if first is not None:
            first()
        started_watching = True
        if not quiet:
            echo(f"watching {', '.join(str(f) for f in folders)} for changes (Ctrl-C stops)")
        for changed in changes:
            if not changed:
                continue
            started = time.perf_counter()
            what = _what_changed(changed)
            try:
                result = run()
            except Exception as exc:
                if stopped():
                    raise Interrupted(0) from exc
                message = " ".join(str(exc).split())
                kind = "" if isinstance(exc, BatchError) else f"{type(exc).__name__}: "
                echo(f"{_clock()} update failed after {what}: {kind}{message}; the previous output is in place, "
                     "watching on")
                continue
            if not quiet:
                echo(f"{_clock()} updated after {what}: {_done(result)} in {time.perf_counter() - started:.1f}s")
    except Interrupted:
        pass
    finally:
        changes.close()
    if not quiet:
        echo("stopped watching; the output holds the last complete update" if started_watching else
             "stopped before the first conversion ended; the previous output, if any, is unchanged")


def _changes(folders: list[Path]):
    """The watcher's change sets, and an empty set each second without changes (the first one once
    it watches); a watcher that cannot start with notifications polls instead."""
    import watchfiles

    options = dict(
        watch_filter=None, debounce=WATCH_DEBOUNCE_MS, step=WATCH_QUIET_MS, raise_interrupt=True,
        rust_timeout=1_000, yield_on_timeout=True,
    )
    # a signal while the watcher waits is KeyboardInterrupt, whichever it was (SIGINT, SIGTERM)
    try:
        try:
            yield from watchfiles.watch(*folders, **options)
        except (OSError, RuntimeError):
            yield from watchfiles.watch(*folders, force_polling=True, **options)
    except KeyboardInterrupt:
        raise Interrupted(0) from None


def _what_changed(changed: set) -> str:
    paths = sorted({str(path) for _, path in changed})
    if not paths:
        return "a change"
    more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
    return f"{len(paths)} changed path{'s' if len(paths) > 1 else ''} ({Path(paths[0]).name}{more})"


def _done(result) -> str:
    reuse = result.manifest["reuse"]
    kept = f", kept {reuse['session_groups_kept']} whose sources are gone" if reuse.get("session_groups_kept") else ""
    return (
        f"converted {reuse['session_groups_converted']} sessions, reused {reuse['session_groups_reused']}{kept}; "
        f"{result.tables.get('sessions', 0)} sessions, {result.tables.get('records', 0)} records"
    )


def _clock() -> str:
    return time.strftime("%H:%M:%S")
