"""Build a synthetic Claude Code archive of any size from the real transcripts of the corpus.

    python bench/generate.py --size-mb 2048 --out bench/archive/2048 [--seed 0]

Each corpus session group (a main transcript with its subagent files and `.meta.json` sidecars,
or an orphan subagent group) is copied again and again into `OUT/<project>/...`, keeping Claude
Code's layout (`<sessionId>.jsonl`, `<sessionId>/subagents/agent-<id>.jsonl`, flat
`agent-<id>.jsonl`). Every copy rewrites, in the raw line text, every UUID (sessionId, uuid,
parentUuid, logicalParentUuid, leafUuid, messageId, promptId, synthetic message ids), every
`msg_`, `req_`, `toolu_` and `srvtoolu_` token and every agentId of the group through a mapping
of its own, so nothing collides across copies while references inside a copy stay consistent.
Replacements keep the length of what they replace, so line sizes keep the corpus skew. Groups
are drawn round by round in a seeded order, so the version mix of the corpus (progress-heavy
2.1.x files carrying most bytes) is kept at every size.

Realistic faults are added at low rates: resume copies (a second main file under a new session
id repeating a prefix of the lines, so the same message.id is in two files), two JSON objects
on one line (`...}{...`), a truncated last line without newline, empty session files.

The same seed gives the same archive byte for byte. A summary is written next to OUT as
`OUT.json`; `bench/run.py` uses it to reuse an archive.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

GENERATOR_VERSION = 1
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT / "tests" / "fixtures" / "corpus"

# Fault rates.
RESUME_RATE = 0.04  # per main-session copy: also written as a resume copy under a new session id
CONCAT_RATE = 1 / 20_000  # per line: joined with the next line (`...}{...`)
TRUNCATE_RATE = 0.003  # per main file: last line cut short, no final newline
EMPTY_RATE = 0.01  # per group copy: an extra zero-byte session file

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
PREFIXED = r"(?:srvtoolu|toolu|msg|req)_[A-Za-z0-9]+"
UUID_RE = re.compile(f"^{UUID}$")
AGENT_FILE_RE = re.compile(r"^agent-(.+)\.jsonl$")
AGENT_FIELD_RE = re.compile(r'"agentId":"([A-Za-z0-9-]{4,40})"')
SESSION_FIELD_RE = re.compile(r'"sessionId":"(' + UUID + ')"')
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@dataclass
class FileTemplate:
    """One corpus file, split into literal text (even indices) and ID tokens (odd indices)."""

    path_parts: list[str]
    text_parts: list[str]
    is_main: bool


@dataclass
class Group:
    """A session group: a main transcript with its subagents, or orphan subagent files."""

    name: str
    project: str
    files: list[FileTemplate] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)
    agent_ids: set[str] = field(default_factory=set)
    session_id: str | None = None  # of the main file, if any
    size: int = 0


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "surrogateescape")


def _project_name(rel_dir: Path) -> str:
    last = rel_dir.name
    if last.startswith("-"):
        return last
    return "-home-bench-" + re.sub(r"[^A-Za-z0-9]+", "-", rel_dir.as_posix()).strip("-")


def _first_session_id(text: str) -> str | None:
    m = SESSION_FIELD_RE.search(text)
    return m.group(1) if m else None


def _first_agent_id(text: str) -> str | None:
    head = text[: 1 << 16]
    for line in head.split("\n")[:8]:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("agentId"), str):
            return obj["agentId"]
    return None


def load_groups(corpus: Path) -> list[Group]:
    """Read the corpus into session-group templates, in a fixed order."""
    jsonl = sorted(p for p in corpus.rglob("*.jsonl") if p.is_file())
    taken: set[Path] = set()
    groups: list[Group] = []

    def add(group: Group, path: Path, rel_path: str, is_main: bool) -> None:
        text = _read(path)
        group.files.append(FileTemplate([rel_path], [text], is_main))
        taken.add(path)
        group.size += len(text.encode("utf-8", "surrogateescape"))
        sidecar = path.with_name(path.name[: -len(".jsonl")] + ".meta.json")
        if sidecar.is_file():
            side_rel = rel_path[: -len(".jsonl")] + ".meta.json"
            side = _read(sidecar)
            group.files.append(FileTemplate([side_rel], [side], False))
            group.size += len(side.encode("utf-8", "surrogateescape"))

    def agent_rel(path: Path, text: str) -> str:
        m = AGENT_FILE_RE.match(path.name)
        aid = m.group(1) if m else (_first_agent_id(text) or path.stem)
        return f"agent-{aid}.jsonl"

    # Main transcripts, with the subagents that belong to them.
    for path in jsonl:
        if "subagents" in path.relative_to(corpus).parts or AGENT_FILE_RE.match(path.name):
            continue
        text = _read(path)
        if _first_agent_id(text) is not None:
            continue  # a renamed subagent file (e.g. sample_agent_sidechain.jsonl)
        stem = path.name[: -len(".jsonl")]
        sid = stem if UUID_RE.match(stem) else (_first_session_id(text) or stem)
        rel_dir = path.parent.relative_to(corpus)
        group = Group(name=path.relative_to(corpus).as_posix(), project=_project_name(rel_dir), session_id=sid)
        add(group, path, f"{sid}.jsonl", True)
        nested = path.parent / stem / "subagents"
        if nested.is_dir():
            for sub in sorted(nested.rglob("*.jsonl")):
                rel = sub.relative_to(path.parent / stem).as_posix()
                add(group, sub, f"{sid}/{rel}", False)
        for sib in sorted(path.parent.glob("*.jsonl")):
            if sib in taken or sib == path:
                continue
            sib_text = _read(sib)
            is_agent = AGENT_FILE_RE.match(sib.name) or _first_agent_id(sib_text) is not None
            if is_agent and _first_session_id(sib_text) == sid:
                add(group, sib, agent_rel(sib, sib_text), False)
        groups.append(group)

    # Orphans: subagent files whose main transcript is not in the corpus, grouped by owner.
    orphans: dict[tuple[Path, str], list[Path]] = {}
    for path in jsonl:
        if path in taken:
            continue
        parts = path.relative_to(corpus).parts
        if "subagents" in parts:
            i = len(parts) - 1 - parts[::-1].index("subagents")
            owner_dir = corpus.joinpath(*parts[: i - 1])
            owner = parts[i - 1]
        else:
            owner_dir = path.parent
            owner = _first_session_id(_read(path)) or path.stem
        orphans.setdefault((owner_dir, owner), []).append(path)
    for (owner_dir, owner), paths in sorted(orphans.items()):
        rel_dir = owner_dir.relative_to(corpus)
        group = Group(name=f"{rel_dir.as_posix()}/{owner} (orphan)", project=_project_name(rel_dir))
        for path in paths:
            parts = path.relative_to(owner_dir).parts
            if "subagents" in parts:
                add(group, path, Path(*parts).as_posix(), False)
            else:
                add(group, path, agent_rel(path, _read(path)), False)
        groups.append(group)

    for group in groups:
        _tokenize(group)
    return groups


def _tokenize(group: Group) -> None:
    agent_ids: set[str] = set()
    for f in group.files:
        m = AGENT_FILE_RE.match(Path(f.path_parts[0]).name)
        if m:
            agent_ids.add(m.group(1))
        agent_ids.update(AGENT_FIELD_RE.findall(f.text_parts[0]))
    agent_ids = {a for a in agent_ids if not UUID_RE.match(a)}
    alternatives = [UUID, PREFIXED]
    if agent_ids:
        alternatives.append(
            "(?<![A-Za-z0-9])(?:" + "|".join(re.escape(a) for a in sorted(agent_ids, key=len, reverse=True))
            + ")(?![A-Za-z0-9])"
        )
    token_re = re.compile("(" + "|".join(alternatives) + ")")
    group.agent_ids = agent_ids
    for f in group.files:
        f.path_parts = token_re.split(f.path_parts[0])
        f.text_parts = token_re.split(f.text_parts[0])
        group.tokens.update(f.path_parts[1::2])
        group.tokens.update(f.text_parts[1::2])


class Mapper:
    """Maps original IDs to new ones of the same shape, per copy, deterministically."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.used_agent_ids: set[str] = set()

    def _digest(self, copy: str, token: str, salt: int = 0) -> bytes:
        return hashlib.blake2b(f"{self.seed}|{copy}|{token}|{salt}".encode(), digest_size=32).digest()

    def uuid(self, copy: str, token: str) -> str:
        h = self._digest(copy, token).hex()
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"

    def mapping(self, copy: str, group: Group) -> dict[str, str]:
        out = {}
        for token in group.tokens:
            if token in group.agent_ids:
                out[token] = self._agent_id(copy, token)
            elif len(token) == 36 and UUID_RE.match(token):
                out[token] = self.uuid(copy, token)
            else:
                prefix, _, body = token.partition("_")
                d = self._digest(copy, token)
                keep = 2 if body.startswith("01") else 0
                n = len(body) - keep
                value = int.from_bytes(d, "big")
                chars = []
                for _ in range(n):
                    value, r = divmod(value, 62)
                    chars.append(BASE62[r])
                    if value == 0:
                        value = int.from_bytes(hashlib.blake2b(d + bytes(chars[-1], "ascii")).digest(), "big")
                out[token] = f"{prefix}_{body[:keep]}{''.join(chars)}"
        return out

    def _agent_id(self, copy: str, token: str) -> str:
        # Agent ids are short: draw again on a collision so no two copies share one.
        if token.startswith("acompact-"):
            prefix, body = "acompact-", token[len("acompact-"):]
        elif token.startswith("a") and len(token) in (7, 17):
            prefix, body = "a", token[1:]
        else:
            prefix, body = "", token
        salt = 0
        while True:
            h = self._digest(copy, token, salt).hex()
            new = prefix + h[: len(body)]
            if new not in self.used_agent_ids:
                self.used_agent_ids.add(new)
                return new
            salt += 1


def _render(parts: list[str], mapping: dict[str, str]) -> str:
    out = parts[:]
    out[1::2] = [mapping[t] for t in parts[1::2]]
    return "".join(out)


def _concatenate(text: str, rng: random.Random) -> tuple[str, int]:
    """Join some lines with the next one, as concurrent writes do: `...}{...`."""
    n = text.count("\n")
    if n < 2 or rng.random() >= n * CONCAT_RATE:
        return text, 0
    lines = text.split("\n")
    i = rng.randrange(0, n - 1)
    lines[i] = lines[i] + lines.pop(i + 1)
    return "\n".join(lines), 1


def _truncate(text: str, rng: random.Random) -> str:
    body = text[:-1] if text.endswith("\n") else text
    start = body.rfind("\n") + 1
    last = body[start:]
    if len(last) < 20:
        return text
    return body[: start + rng.randrange(10, len(last) - 5)]


def _prefix_lines(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    keep = max(1, int(len(lines) * rng.uniform(0.3, 0.8)))
    return "\n".join(lines[:keep]) + "\n"


def generate(
    size_mb: float,
    out: Path,
    seed: int = 0,
    corpus: Path = DEFAULT_CORPUS,
    *,
    invalid_lines: bool = True,
    verbose: bool = True,
) -> dict:
    """Write an archive of at least `size_mb` MiB into `out` (emptied first); return its summary.

    `invalid_lines=False` leaves out the faults that make a line invalid JSON (two objects on one
    line, a truncated last line); the other faults stay.
    """
    started = time.perf_counter()
    groups = load_groups(corpus)
    if not groups:
        raise SystemExit(f"{corpus}: no transcripts found")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rng = random.Random(seed)
    mapper = Mapper(seed)
    target = int(size_mb * (1 << 20))
    stats = {
        "files": 0, "bytes": 0, "lines": 0, "group_copies": 0, "resume_copies": 0,
        "concatenated_lines": 0, "truncated_files": 0, "empty_files": 0,
    }
    copy_no = 0
    made_dirs: set[Path] = set()

    def write(rel: str, project: str, text: str) -> None:
        path = out / project / rel
        if path.parent not in made_dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            made_dirs.add(path.parent)
        if path.exists():
            raise RuntimeError(f"generated path collides: {path}")
        data = text.encode("utf-8", "surrogateescape")
        path.write_bytes(data)
        stats["files"] += 1
        stats["bytes"] += len(data)
        stats["lines"] += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)

    while stats["bytes"] < target:
        order = list(range(len(groups)))
        rng.shuffle(order)
        for gi in order:
            if stats["bytes"] >= target:
                break
            group = groups[gi]
            copy = f"c{copy_no}"
            copy_no += 1
            mapping = mapper.mapping(copy, group)
            stats["group_copies"] += 1
            for f in group.files:
                rel = _render(f.path_parts, mapping)
                text = _render(f.text_parts, mapping)
                if rel.endswith(".jsonl") and invalid_lines:
                    text, joined = _concatenate(text, rng)
                    stats["concatenated_lines"] += joined
                    if f.is_main and text and rng.random() < TRUNCATE_RATE:
                        text = _truncate(text, rng)
                        stats["truncated_files"] += 1
                write(rel, group.project, text)
                if f.is_main and group.session_id and text.count("\n") >= 10 and rng.random() < RESUME_RATE:
                    # Resume copy: same uuids and message ids, new session id, a prefix of the lines.
                    old_sid = mapping[group.session_id]
                    new_sid = mapper.uuid(copy, "resume:" + group.session_id)
                    resumed = _prefix_lines(text, rng).replace(old_sid, new_sid)
                    write(f"{new_sid}.jsonl", group.project, resumed)
                    stats["resume_copies"] += 1
            if rng.random() < EMPTY_RATE:
                write(f"{mapper.uuid(copy, 'empty')}.jsonl", group.project, "")
                stats["empty_files"] += 1
        if verbose:
            print(f"  {stats['bytes'] / (1 << 20):9.1f} MiB, {stats['files']} files", file=sys.stderr)

    summary = {
        "generator_version": GENERATOR_VERSION,
        "size_mb": size_mb,
        "seed": seed,
        "invalid_lines": invalid_lines,
        "corpus_groups": len(groups),
        "projects": len({g.project for g in groups}),
        **stats,
        "mib": round(stats["bytes"] / (1 << 20), 3),
        "seconds": round(time.perf_counter() - started, 2),
    }
    stamp_path(out).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def stamp_path(out: Path) -> Path:
    """Where the summary of an archive is kept: next to it, so the converter does not see it."""
    return out.with_name(out.name + ".json")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, required=True, help="archive size in MiB (at least this much)")
    ap.add_argument("--out", type=Path, required=True, help="archive folder (replaced)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument(
        "--no-invalid-lines", action="store_true",
        help="leave out concatenated objects and truncated last lines (lines that are not valid JSON)",
    )
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    summary = generate(
        args.size_mb, args.out, args.seed, args.corpus, invalid_lines=not args.no_invalid_lines, verbose=not args.quiet
    )
    print(
        f"wrote {summary['mib']:.1f} MiB, {summary['files']} files, {summary['lines']} lines "
        f"({summary['group_copies']} group copies, {summary['resume_copies']} resume copies, "
        f"{summary['concatenated_lines']} concatenated lines, {summary['truncated_files']} truncated files, "
        f"{summary['empty_files']} empty files) to {args.out} in {summary['seconds']:.1f}s"
    )


if __name__ == "__main__":
    main()
