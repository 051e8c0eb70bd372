"""Commits that name checkpoints: the `Entire-Checkpoint:` trailers of the code history.

A trailer names a 12-hex or ULID checkpoint ID; the checkpoint itself may be absent (the format
declares that loss, entire_checkpoint.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pygit2

from batch.sources.git import peel_commit, ref_names

TRAILER = re.compile(r"^Entire-Checkpoint:[ \t]*([0-9a-f]{12}|[0-7][0-9ABCDEFGHJKMNPQRSTVWXYZ]{25})[ \t]*$", re.M)


@dataclass(frozen=True)
class CommitLink:
    """An `Entire-Checkpoint:` trailer of a commit."""

    commit_id: str
    checkpoint_id: str
    index: int  # 0-based position among the commit's trailers


def scan_trailers(repo: pygit2.Repository) -> list[CommitLink]:
    """Every `Entire-Checkpoint:` trailer in the history of every branch, Entire's own branches excepted.

    Local and remote-tracking branches are walked together, each commit once; a commit can carry
    several trailers (squashed or redone commits). Branches under `entire/` (checkpoints, shadow
    snapshots, trails) are Entire's storage, not code history. Ordered by commit ID, then position."""
    walker = None
    for ref in ref_names(repo):
        branch = ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None
        if ref.startswith("refs/remotes/"):
            branch = ref.split("/", 3)[3] if ref.count("/") >= 3 else None
        if branch is None or branch.startswith("entire/") or branch == "HEAD":
            continue
        commit = peel_commit(repo, ref)
        if commit is None:
            continue
        if walker is None:
            walker = repo.walk(commit.id, pygit2.enums.SortMode.NONE)
        else:
            walker.push(commit.id)
    links = []
    for commit in walker or ():
        seen: list[str] = []
        for match in TRAILER.finditer(commit.raw_message.decode("utf-8", "replace")):
            if match.group(1) not in seen:
                seen.append(match.group(1))
        links.extend(CommitLink(str(commit.id), cid, i) for i, cid in enumerate(seen))
    return sorted(links, key=lambda link: (link.commit_id, link.index))
