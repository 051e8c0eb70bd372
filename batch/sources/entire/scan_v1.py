"""The v1 layout: the branch `entire/checkpoints/v1` and its remote-tracking copies, one subtree per checkpoint.

At the branch tip, checkpoint `<id>` is the subtree `<id[:2]>/<id[2:]>/` (read by checkpoint.py);
any other entry of the root tree or of a shard folder is listed in `Scan.skipped` (a README.md or
.gitkeep at the root is not). Routing key: after the per-checkpoint refs; among the v1 copies, the
one whose newest session metadata is most recent, then the local branch before remote-tracking ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pygit2

from batch.sources.entire.checkpoint import read_checkpoint, tree_or_none
from batch.sources.entire.model import (
    Checkpoint,
    CheckpointLocation,
    Layout,
    Scan,
    SourceLoss,
    is_checkpoint_id,
)
from batch.sources.git import peel_commit

V1_BRANCH = "refs/heads/entire/checkpoints/v1"
V1_REMOTE = re.compile(r"^refs/remotes/[^/]+/entire/checkpoints/v1$")


def claims(ref: str) -> bool:
    """The local v1 branch or a remote-tracking copy of it."""
    return ref == V1_BRANCH or bool(V1_REMOTE.match(ref))


def candidates(repo: pygit2.Repository, name: str, ref: str, scan: Scan) -> Iterator[tuple[tuple, Checkpoint]]:
    """Every checkpoint at the tip of `ref`, with its routing key."""
    rank = 1 if ref == V1_BRANCH else 2
    for checkpoint in read_branch(repo, name, ref, scan):
        newest = max((s.created_at for s in checkpoint.sessions if s.created_at), default=None)
        # a more recent copy first; then the local branch before remote-tracking ones
        yield (1, -(newest.timestamp() if newest else float("-inf")), rank, ref), checkpoint


def read_branch(repo: pygit2.Repository, name: str, ref: str, scan: Scan) -> Iterator[Checkpoint]:
    commit = peel_commit(repo, ref)
    if commit is None:
        scan.skipped.append((ref, "does not point to a commit"))
        return
    for top in sorted(commit.tree, key=lambda e: e.name):
        if top.type_str != "tree" or len(top.name) != 2:
            if top.type_str == "tree" or top.name not in ("README.md", ".gitkeep"):
                scan.skipped.append((f"{ref}:{top.name}", "not a checkpoint shard folder"))
            continue
        shard = tree_or_none(repo, top)
        if shard is None:
            scan.skipped.append((f"{ref}:{top.name}", f"tree {top.id} is absent from the repository"))
            continue
        for sub in sorted(shard, key=lambda e: e.name):
            cid = top.name + sub.name
            if sub.type_str != "tree" or not is_checkpoint_id(cid):
                scan.skipped.append((f"{ref}:{top.name}/{sub.name}", "not a checkpoint folder"))
                continue
            location = CheckpointLocation(name, ref, str(commit.id), f"{top.name}/{sub.name}")
            tree = tree_or_none(repo, sub)
            if tree is None:
                yield Checkpoint(cid, location, None, [], [SourceLoss(
                    "missing_blob", f"tree {sub.id} of the checkpoint is absent from the repository", cid, None,
                    location.base,
                )])
                continue
            yield read_checkpoint(repo, cid, location, tree)


LAYOUT = Layout("v1 branch", claims, candidates)
