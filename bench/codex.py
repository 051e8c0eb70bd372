"""A synthetic Codex archive (`sessions/YYYY/MM/DD/rollout-*.jsonl`) made of the real rollouts of
tests/fixtures/codex, copied until the archive reaches a size.

    python bench/codex.py SIZE_MB DEST [--seed 0]

Copy k of a rollout gets its own session ID (a UUID drawn from the seed, put wherever the file's
own ID appears) and cumulative token counts shifted by k (`info.total_token_usage`), so that no two
copies share a response: the converter tells responses apart by their usage (formats/codex), and
copies of one session would otherwise be one session's usage counted once. Each line's JSON is
otherwise kept; the lines are re-serialized with `json.dumps` (separators as Codex writes them).
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROLLOUTS = sorted((ROOT / "tests" / "fixtures" / "codex").glob("rollout-*.jsonl"))
SEPARATORS = (",", ":")


def copy_of(lines: list[dict], k: int, session_id: str) -> bytes:
    """Copy k of a parsed rollout under `session_id`."""
    own = lines[0]["payload"]["id"]
    out = []
    for obj in lines:
        payload = obj.get("payload")
        info = payload.get("info") if isinstance(payload, dict) and payload.get("type") == "token_count" else None
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict):
            for key in ("input_tokens", "total_tokens"):
                if isinstance(total.get(key), int):
                    total[key] += k
        out.append(json.dumps(obj, ensure_ascii=False, separators=SEPARATORS).replace(own, session_id))
    return ("\n".join(out) + "\n").encode()


def generate(size_mb: float, dest: Path, seed: int = 0) -> dict:
    """Write copies of the real rollouts into `dest` until it holds `size_mb` MiB; return its figures."""
    rng = random.Random(seed)
    parsed = [[json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
              for p in ROLLOUTS]
    target, written, files, k = size_mb * (1 << 20), 0, 0, 0
    while written < target:
        for source, lines in zip(ROLLOUTS, parsed):
            session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            day = f"2026/{1 + k % 12:02d}/{1 + k % 28:02d}"
            path = dest / "sessions" / day / f"{source.stem.rsplit('-', 5)[0]}-{session_id}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            data = copy_of(json.loads(json.dumps(lines)), k, session_id)
            path.write_bytes(data)
            written, files = written + len(data), files + 1
            if written >= target:
                break
        k += 1
    return {"mib": written / (1 << 20), "files": files}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("size_mb", type=float)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(generate(args.size_mb, args.dest, args.seed))


if __name__ == "__main__":
    main()
