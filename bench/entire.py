"""Benchmark of the Entire import: a generated checkpoints repository against reading and converting the same bytes.

    python bench/entire.py --size-mb 64 [--checkpoints 3] [--chunk-mb 2] [--keep]

1. A Claude Code archive of `--size-mb` is generated (bench/generate.py, valid lines only), then
   written into a new Git repository with `git fast-import`: each main session becomes `--checkpoints`
   checkpoints on `entire/checkpoints/v1` (checkpoint k holds the first k/N of the session's lines, as
   Entire stores the whole session so far), its full.jsonl split into chunks of `--chunk-mb`
   (`full.jsonl`, `full.jsonl.001`, ...), its subagent files under the newest checkpoint's
   `tasks/<tool use id>/`, and a code branch `main` with one commit per checkpoint carrying an
   `Entire-Checkpoint:` trailer.
2. The same transcripts the import converts (the newest checkpoint of every session and its
   subagents) are written as a Claude Code folder.
3. Timed, each in a subprocess: `git cat-file --batch` reading every blob the import reads (all
   metadata.json, the newest checkpoint's chunks and task transcripts); `asr-batch convert` of the
   folder; `asr-batch convert --entire` of the repository. Target: the import takes at most 1.3 times
   the sum of the first two.
Results go to bench/results/entire-<size>mb.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
BASE_TIME = 1_767_225_600  # 2026-01-01T00:00:00Z


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def chunks(data: bytes, limit: int) -> list[bytes]:
    """Split at line boundaries into pieces of at most `limit` bytes (a longer line is a piece of its own),
    each without its final newline, as Entire stores full.jsonl; a transcript within the limit is kept whole."""
    if len(data) <= limit:
        return [data]
    lines = data.rstrip(b"\n").split(b"\n")
    out, current, size = [], [], 0
    for line in lines:
        if current and size + len(line) + 1 > limit:
            out.append(b"\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        out.append(b"\n".join(current))
    return out


class FastImport:
    """A `git fast-import` process fed blobs and commits."""

    def __init__(self, repo: Path) -> None:
        self.proc = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE, env=ENV)
        self.mark = 0

    def _data(self, data: bytes) -> None:
        self.proc.stdin.write(b"data %d\n" % len(data) + data + b"\n")

    def blob(self, data: bytes) -> int:
        self.mark += 1
        self.proc.stdin.write(b"blob\nmark :%d\n" % self.mark)
        self._data(data)
        return self.mark

    def commit(self, ref: str, message: str, files: dict[str, int | bytes], when: int, parent: int | None) -> int:
        self.mark += 1
        w = self.proc.stdin
        w.write(f"commit {ref}\nmark :{self.mark}\ncommitter Bench <bench@example.invalid> {when} +0000\n".encode())
        self._data(message.encode())
        if parent:
            w.write(b"from :%d\n" % parent)
        for path, blob in files.items():
            if isinstance(blob, bytes):
                w.write(f"M 100644 inline {path}\n".encode())
                self._data(blob)
            else:
                w.write(f"M 100644 :{blob} {path}\n".encode())
        return self.mark

    def close(self) -> None:
        self.proc.stdin.close()
        if self.proc.wait():
            raise SystemExit("git fast-import failed")


def build(archive: Path, repo: Path, files: Path, *, checkpoints: int, chunk: int) -> dict:
    """Write the repository and the folder of the transcripts it converts; return what the import reads."""
    for folder in (repo, files):
        shutil.rmtree(folder, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=ENV)
    fi = FastImport(repo)
    read: list[str] = []  # blob IDs the import reads
    v1 = code = None
    n = 0
    mains = sorted(p for p in archive.rglob("*.jsonl") if p.parent.parent == archive and not p.name.startswith("agent-"))
    for main in mains:
        data = main.read_bytes()
        if not data.strip():
            continue
        sid = main.stem
        lines = data.rstrip(b"\n").split(b"\n")
        subagents = sorted((main.parent / sid / "subagents").glob("agent-*.jsonl")) if (main.parent / sid).is_dir() else []
        dest = files / main.parent.name
        dest.mkdir(parents=True, exist_ok=True)
        (dest / main.name).write_bytes(data)
        for sub in subagents:
            (dest / sid / "subagents").mkdir(parents=True, exist_ok=True)
            (dest / sid / "subagents" / sub.name).write_bytes(sub.read_bytes())
            sidecar = sub.with_name(sub.name[: -len(".jsonl")] + ".meta.json")
            if sidecar.is_file():  # the folder keeps what names the spawning call, as tasks/<tool use id>/ does
                shutil.copyfile(sidecar, dest / sid / "subagents" / sidecar.name)
        start = 0
        for k in range(1, checkpoints + 1):
            n += 1
            cid = hashlib.sha1(f"{sid}:{k}".encode()).hexdigest()[:12]
            base = f"{cid[:2]}/{cid[2:]}"
            end = len(lines) * k // checkpoints if k < checkpoints else len(lines)
            whole = b"\n".join(lines[:end]) + b"\n"
            newest = k == checkpoints
            tree: dict[str, int | bytes] = {}
            for i, piece in enumerate(chunks(whole, chunk)):
                name = "full.jsonl" if i == 0 else f"full.jsonl.{i:03d}"
                tree[f"{base}/0/{name}"] = fi.blob(piece)
                if newest:
                    read.append(blob_id(piece))
            when = BASE_TIME + n * 60
            session_meta = json.dumps({
                "checkpoint_id": cid, "session_id": sid, "agent": "Claude Code", "strategy": "manual-commit",
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)),
                **({"checkpoint_transcript_start": start} if start else {}),
            }, indent=2).encode()
            root_meta = json.dumps({"checkpoint_id": cid, "cli_version": "0.8.42", "strategy": "manual-commit",
                                    "sessions": [{"metadata": f"/{base}/0/metadata.json"}]}, indent=2).encode()
            tree[f"{base}/0/metadata.json"] = session_meta
            tree[f"{base}/metadata.json"] = root_meta
            tree[f"{base}/0/content_hash.txt"] = ("sha256:" + hashlib.sha256(whole).hexdigest()).encode()
            read += [blob_id(session_meta), blob_id(root_meta), blob_id(tree[f"{base}/0/content_hash.txt"])]
            if newest:
                for j, sub in enumerate(subagents):
                    body = sub.read_bytes()
                    tool_use = _tool_use_id(sub) or f"toolu_bench{j:04d}{sid[:8]}"
                    tree[f"{base}/tasks/{tool_use}/{sub.name}"] = fi.blob(body)
                    read.append(blob_id(body))
            v1 = fi.commit("refs/heads/entire/checkpoints/v1", f"Checkpoint: {cid}\n", tree, when, v1)
            code = fi.commit("refs/heads/main", f"Change {n}\n\nEntire-Checkpoint: {cid}\n",
                             {"CHANGES.md": f"change {n}\n".encode()}, when + 1, code)
            start = end
    fi.close()
    return {"checkpoints": n, "sessions": len(mains), "blobs_read": read}


def _tool_use_id(subagent: Path) -> str | None:
    """The spawning call a subagent's sidecar names, if any."""
    try:
        value = json.loads(subagent.with_name(subagent.name[: -len(".jsonl")] + ".meta.json").read_text()).get("toolUseId")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def timed(cmd: list[str], *, stdin: bytes | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, check=True, env=ENV)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=64, help="Claude Code archive to start from, MiB (default 64)")
    ap.add_argument("--checkpoints", type=int, default=3, help="checkpoints per session (default 3)")
    ap.add_argument("--chunk-mb", type=float, default=2, help="full.jsonl chunk size, MiB (default 2)")
    ap.add_argument("--repeat", type=int, default=1, help="time each step N times; keep the fastest")
    ap.add_argument("--keep", action="store_true", help="keep the generated repository, folder and outputs")
    args = ap.parse_args()
    size = f"{args.size_mb:g}"
    work = ROOT / "bench" / "archive" / f"entire-{size}"
    archive, repo, files = work / "archive", work / "repo.git", work / "files"
    if not archive.is_dir():
        subprocess.run([sys.executable, str(ROOT / "bench" / "generate.py"), "--size-mb", size, "--out", str(archive),
                        "--no-invalid-lines", "--quiet"], check=True)
    started = time.perf_counter()
    built = build(archive, repo, files, checkpoints=args.checkpoints, chunk=int(args.chunk_mb * (1 << 20)))
    build_s = time.perf_counter() - started
    ids = ("\n".join(built["blobs_read"]) + "\n").encode()
    repo_mb = sum(f.stat().st_size for f in repo.rglob("*") if f.is_file()) / (1 << 20)
    files_mb = sum(f.stat().st_size for f in files.rglob("*") if f.is_file()) / (1 << 20)
    cli = str(BIN / "asr-batch")
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        steps = {
            "cat_file": lambda: timed(["git", "-C", str(repo), "cat-file", "--batch"], stdin=ids),
            "convert_files": lambda: timed([cli, "convert", str(files), "--out", str(work / "out-files"), "--quiet"]),
            "import": lambda: timed([cli, "convert", "--entire", str(repo), "--out", str(work / "out-import"), "--quiet"]),
        }
        for name, step in steps.items():
            best[name] = min(best.get(name, float("inf")), step())
    ratio = best["import"] / (best["cat_file"] + best["convert_files"])
    result = {
        "size_mb": args.size_mb, "checkpoints_per_session": args.checkpoints, "chunk_mb": args.chunk_mb,
        "sessions": built["sessions"], "checkpoints": built["checkpoints"], "blobs_read": len(built["blobs_read"]),
        "repository_mb": round(repo_mb, 1), "transcripts_mb": round(files_mb, 1), "build_s": round(build_s, 1),
        **{f"{k}_s": round(v, 2) for k, v in best.items()}, "ratio": round(ratio, 2), "target": 1.3,
        "cpus": os.cpu_count(), "load_average": os.getloadavg(),
    }
    print(f"repository {repo_mb:.1f} MiB ({built['checkpoints']} checkpoints of {built['sessions']} sessions), "
          f"transcripts converted {files_mb:.1f} MiB")
    print(f"git cat-file --batch      {best['cat_file']:7.2f} s  ({len(built['blobs_read'])} blobs)")
    print(f"convert the folder        {best['convert_files']:7.2f} s")
    print(f"import the repository     {best['import']:7.2f} s")
    print(f"import / (read + convert) {ratio:7.2f}   (target <= 1.3)   load average {os.getloadavg()[0]:.1f}")
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / f"entire-{size}mb.json").write_text(json.dumps(result, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
