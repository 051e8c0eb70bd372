"""Per-checkpoint refs: `refs/entire/checkpoints/<shard>/<id>`, the tip commit's root tree is the checkpoint.

The shard is the ID's last two characters; the ID is 12 lowercase hex characters (a checkpoint
migrated from the v1 branch) or a ULID (stored only there). Storage refs of other layouts under
`refs/entire/checkpoints/v1/`, `v2/` are not per-checkpoint refs and are passed over silently; any
other ref of this shape that breaks the rule is listed in `Scan.skipped`. Routing key: before
every v1 copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pygit2

from batch.sources.entire.checkpoint import read_checkpoint
from batch.sources.entire.model import (
    Checkpoint,
    CheckpointLocation,
    Layout,
    Scan,
    is_checkpoint_id,
)
from batch.sources.git import peel_commit

CHECKPOINT_REF = re.compile(r"^refs/entire/checkpoints/([^/]{2})/([^/]+)$")


def claims(ref: str) -> bool:
    return bool(CHECKPOINT_REF.match(ref))


def candidates(repo: pygit2.Repository, name: str, ref: str, scan: Scan) -> Iterator[tuple[tuple, Checkpoint]]:
    """The checkpoint `ref` names, with its routing key; nothing when the ref is not a per-checkpoint ref."""
    shard, cid = CHECKPOINT_REF.match(ref).groups()
    if not is_checkpoint_id(cid) or shard.lower() != cid[-2:].lower():
        if ref.startswith("refs/entire/checkpoints/v"):
            return  # v1/*, v2/* storage refs: not per-checkpoint refs
        scan.skipped.append((ref, "not a per-checkpoint ref: the shard is not the ID's last two characters"))
        return
    commit = peel_commit(repo, ref)
    if commit is None:
        scan.skipped.append((ref, "does not point to a commit"))
        return
    location = CheckpointLocation(name, ref, str(commit.id), "")
    yield (0, 0.0, 0, ref), read_checkpoint(repo, cid, location, commit.tree)


LAYOUT = Layout("per-checkpoint refs", claims, candidates)
