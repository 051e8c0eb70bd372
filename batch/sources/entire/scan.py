"""The scan: every checkpoint of a repository, routed among the layouts that hold it, metadata only.

Each layout (model.Layout) claims its references and reads their checkpoints with a routing key:
the per-checkpoint refs (scan_refs.py), the v1 branch and its remote-tracking copies (scan_v1.py);
they are asked in order and the first claiming a ref reads it. Entire's v2 refs are not routed but
merged, session by session, into what the others found (scan_v2.py).
"""

from __future__ import annotations

import pygit2

from batch.sources.entire import scan_refs, scan_v1, scan_v2
from batch.sources.entire.model import Checkpoint, Layout, Scan
from batch.sources.git import ref_names, repository_name

LAYOUTS: tuple[Layout, ...] = (scan_v1.LAYOUT, scan_refs.LAYOUT)


def scan_checkpoints(repo: pygit2.Repository) -> Scan:
    """Enumerate the checkpoints of a repository, routed as Entire reads them, with their sessions.

    Routing when one ID is in several places: a per-checkpoint ref first (ULIDs live only there,
    12-hex IDs there once migrated), then the `entire/checkpoints/v1` branch, then its
    remote-tracking copies; when several v1 copies differ, the one whose newest session metadata
    is most recent wins. The references not read are listed in `Checkpoint.shadowed`. Then the v2
    refs add the checkpoints and the sessions no other layout holds (scan_v2.merge).
    """
    name = repository_name(repo)
    scan = Scan(name)
    candidates: dict[str, list[tuple[tuple, Checkpoint]]] = {}
    v2_refs = []
    for ref in ref_names(repo):
        if scan_v2.claims(ref):
            v2_refs.append(ref)
            continue
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
    scan_v2.merge(repo, scan, v2_refs)
    return scan
