"""Files of Entire agent-protocol events (hook data): find the .jsonl files named with --entire-events.

A path is a file, read whatever its name, or a folder whose `.jsonl` files are read (every other
file below it is listed in `skipped`). What the bytes mean is formats/entire_events.py's concern.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from batch.errors import SourceError
from batch.sources.walk import display


@dataclass
class EventFiles:
    """What discovery found: event files (path, name shown in the outputs) and paths skipped."""

    files: list[tuple[Path, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why)
    roots: list[Path] = field(default_factory=list)  # the paths, resolved
    # per file, by its name shown: size, modification time (ns) and its sessions (key, bytes owned),
    # so that a later discovery does not read an unchanged file again (formats/entire_events.discover)
    heads: dict[str, list] = field(default_factory=dict)


def find(paths: list[Path]) -> EventFiles:
    """Every events file under `paths`, in name order; a path that does not exist or holds none is an error."""
    found = EventFiles()
    for path in paths:
        if not path.exists():
            raise SourceError(
                f"--entire-events {path}: no such file or folder. Pass a JSONL file of Entire agent-protocol "
                "events, or a folder of them."
            )
        root = path.resolve()
        if root in found.roots:
            continue
        found.roots.append(root)
        prefix = display(root.name) or "/"
        before = len(found.files)
        if root.is_file():
            found.files.append((root, prefix))
            continue

        def unreadable(exc: OSError, root=root, prefix=prefix) -> None:
            rel = Path(exc.filename).relative_to(root).as_posix() if exc.filename else "."
            found.skipped.append((prefix if rel == "." else f"{prefix}/{display(rel)}",
                                  f"folder cannot be read ({exc.strerror})"))

        # links to folders are not followed: an events folder holds files, not a tree of links
        for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
            dirnames.sort()
            here = Path(dirpath)
            for filename in sorted(filenames):
                file = here / filename
                shown = f"{prefix}/{display(file.relative_to(root).as_posix())}"
                if filename.endswith(".jsonl") and file.is_file():
                    found.files.append((file, shown))
                else:
                    found.skipped.append((shown, "not a .jsonl file of Entire events"))
        if len(found.files) == before:
            raise SourceError(
                f"--entire-events {path}: no .jsonl file in this folder. Pass a JSONL file of Entire agent-protocol "
                "events, or a folder holding them."
            )
    found.files.sort(key=lambda f: f[1])
    return found
