"""The scan: every checkpoint of a repository, routed among the layouts that hold it, metadata only.

Each layout (model.Layout) claims its references and reads their checkpoints with a routing key:
the per-checkpoint refs (scan_refs.py), the v1 branch and its remote-tracking copies (scan_v1.py).
A later layout (Entire's v2 refs) is one more module and one more entry of LAYOUTS; they are asked
in order and the first claiming a ref reads it (a v2 layout goes before scan_refs, whose pattern
`refs/entire/checkpoints/<2 chars>/<name>` also matches `v2/main` and passes it over).
"""

from __future__ import annotations

import pygit2

from batch.sources.entire import scan_refs, scan_v1
from batch.sources.entire.model import Checkpoint, Layout, Scan
from batch.sources.git import ref_names, repository_name

LAYOUTS: tuple[Layout, ...] = (scan_v1.LAYOUT, scan_refs.LAYOUT)


def scan_checkpoints(repo: pygit2.Repository) -> Scan:
    """Enumerate the checkpoints of a repository, routed as Entire reads them, with their sessions.

    Routing when one ID is in several places: a per-checkpoint ref first (ULIDs live only there,
    12-hex IDs there once migrated), then the `entire/checkpoints/v1` branch, then its
    remote-tracking copies; when several v1 copies differ, the one whose newest session metadata
    is most recent wins. The references not read are listed in `Checkpoint.shadowed`.
    """
    name = repository_name(repo)
    scan = Scan(name)
    candidates: dict[str, list[tuple[tuple, Checkpoint]]] = {}
    for ref in ref_names(repo):
        layout = next((layout for layout in LAYOUTS if layout.claims(ref)), None)
        if layout is None:
            continue
        for key, checkpoint in layout.candidates(repo, name, ref, scan):
            candidates.setdefault(checkpoint.checkpoint_id, []).append((key, checkpoint))
    for cid in sorted(candidates):
        ranked = sorted(candidates[cid], key=lambda kc: kc[0])
        chosen = ranked[0][1]
        chosen.shadowed = [c.location.ref for _, c in ranked[1:]]
        scan.checkpoints.append(chosen)
    return scan
