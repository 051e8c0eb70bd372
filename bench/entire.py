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
   folder and `asr-batch convert --entire` of the repository, both with `--full` (a repeat converts
   everything again). Target: the import takes at most 1.3 times the sum of the first two.
4. Incremental re-runs over the import's output: with nothing changed, then after one new checkpoint
   (a commit on entire/checkpoints/v1 adding a newer checkpoint of the session of median size, its
   transcript one line longer, and a code commit naming it; both prepared by step 1 on refs of their
   own, `refs/bench/next-*`, and moved onto the branches for this step only). Each as a share of the
   full import in wall and CPU seconds; then the re-run's output is compared, table by table and row
   by row (bench/compare.py) and manifest, with a `--full` import of the same repository.
5. What the output holds of the repository (`git_objects`) against the output's size and the folder's
   output; then the full import's output converted again into a new folder, its repository rebuilt
   from `git_objects` (as an upgrade without the repository), timed once and compared with it.
Each step's CPU seconds are its process's (and its children's); CPU time other processes used
meanwhile is reported too (the machine's busy time from /proc/stat, less the step's).
Results go to bench/results/entire-<size>mb.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from run import busy_cpu_seconds  # bench/run.py

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
    # the session a new checkpoint is added to for the incremental re-run: the one of median size
    grown = sorted((p for p in mains if p.stat().st_size), key=lambda p: (p.stat().st_size, p.name))[len(mains) // 2]
    grown_at: dict = {}
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
            if newest and main == grown:
                tasks = {path: blob for path, blob in tree.items() if "/tasks/" in path}
                grown_at = {"sid": sid, "lines": lines, "tasks": tasks}
            start = end
    # one more checkpoint of the grown session: its whole transcript and one more line, its subagents again
    sid, lines = grown_at["sid"], grown_at["lines"]
    cid = hashlib.sha1(f"{sid}:{checkpoints + 1}".encode()).hexdigest()[:12]
    base, when = f"{cid[:2]}/{cid[2:]}", BASE_TIME + (n + 1) * 60
    line = json.dumps({"type": "user", "uuid": "00000000-0000-4000-8000-000000000001", "parentUuid": None,
                       "sessionId": sid, "timestamp": "2026-03-01T00:00:00.000Z", "isSidechain": False,
                       "message": {"role": "user", "content": "one more prompt"}}).encode()
    whole = b"\n".join([*lines, line]) + b"\n"
    tree = {f"{base}/0/{'full.jsonl' if i == 0 else f'full.jsonl.{i:03d}'}": piece
            for i, piece in enumerate(chunks(whole, chunk))}
    tree[f"{base}/0/metadata.json"] = json.dumps({
        "checkpoint_id": cid, "session_id": sid, "agent": "Claude Code", "strategy": "manual-commit",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)),
        "checkpoint_transcript_start": len(lines),
    }, indent=2).encode()
    tree[f"{base}/metadata.json"] = json.dumps({
        "checkpoint_id": cid, "cli_version": "0.8.42", "strategy": "manual-commit",
        "sessions": [{"metadata": f"/{base}/0/metadata.json"}],
    }, indent=2).encode()
    tree[f"{base}/0/content_hash.txt"] = ("sha256:" + hashlib.sha256(whole).hexdigest()).encode()
    for path, blob in grown_at["tasks"].items():
        tree[f"{base}/tasks/{path.split('/tasks/', 1)[1]}"] = blob
    fi.commit("refs/bench/next-v1", f"Checkpoint: {cid}\n", tree, when, v1)
    fi.commit("refs/bench/next-main", f"Change {n + 1}\n\nEntire-Checkpoint: {cid}\n",
              {"CHANGES.md": f"change {n + 1}\n".encode()}, when + 1, code)
    fi.close()
    return {"checkpoints": n, "sessions": len(mains), "blobs_read": read,
            "grown_session": sid, "grown_session_mb": round(len(whole) / (1 << 20), 2)}


def _tool_use_id(subagent: Path) -> str | None:
    """The spawning call a subagent's sidecar names, if any."""
    try:
        value = json.loads(subagent.with_name(subagent.name[: -len(".jsonl")] + ".meta.json").read_text()).get("toolUseId")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def timed(cmd: list[str], *, stdin: bytes | None = None) -> dict:
    """Run `cmd`; its wall and CPU seconds (its own and its children's), and other processes' CPU seconds meanwhile."""
    busy = busy_cpu_seconds()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, check=True, env=ENV)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    other = max(0.0, busy_cpu_seconds() - busy - cpu) if busy is not None else None
    return {"s": wall, "cpu_s": cpu, "other_cpu_s": other}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=ENV)
    return done.stdout.strip()


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / (1 << 20)


def same_output(a: Path, b: Path) -> bool:
    """Every table equal row by row (bench/compare.py) but for when sessions were last read, and the
    manifests but for their `reuse` and `files` (the part files, which batches the runs made)."""
    tables = subprocess.run([sys.executable, str(ROOT / "bench" / "compare.py"), str(a), str(b),
                             "--exclude", "sessions.source_last_read_at"],
                            stdout=subprocess.DEVNULL, check=False).returncode == 0
    manifests = [json.loads((o / "manifest.json").read_text()) for o in (a, b)]
    for m in manifests:
        m.pop("reuse")
        m.pop("files")
    return tables and manifests[0] == manifests[1]


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
    out = work / "out-import"
    prepared = {"refs/heads/entire/checkpoints/v1": "refs/bench/next-v1", "refs/heads/main": "refs/bench/next-main"}
    refs = {ref: git(repo, "rev-parse", ref) for ref in prepared}
    nexts = {ref: git(repo, "rev-parse", name) for ref, name in prepared.items()}

    def move(to: dict[str, str]) -> None:
        for ref, commit in to.items():
            git(repo, "update-ref", ref, commit)

    def new_checkpoint() -> dict:
        move(nexts)
        try:
            return timed([cli, "convert", "--entire", str(repo), "--out", str(out), "--quiet"])
        finally:
            move(refs)

    steps = {
        "cat_file": lambda: timed(["git", "-C", str(repo), "cat-file", "--batch"], stdin=ids),
        "convert_files": lambda: timed([cli, "convert", str(files), "--out", str(work / "out-files"), "--quiet",
                                        "--full"]),
        "import": lambda: timed([cli, "convert", "--entire", str(repo), "--out", str(out), "--quiet", "--full"]),
        # over the import's output: nothing changed, then one new checkpoint (the branches moved for it)
        "rerun_unchanged": lambda: timed([cli, "convert", "--entire", str(repo), "--out", str(out), "--quiet"]),
        "rerun_new_checkpoint": new_checkpoint,
    }
    runs: dict[str, list[dict]] = {name: [] for name in steps}
    reuse: dict[str, dict] = {}
    for _ in range(args.repeat):
        for name, step in steps.items():
            runs[name].append(step())
            if name.startswith("rerun"):
                reuse[name] = json.loads((out / "manifest.json").read_text())["reuse"]
    best = {name: min(r, key=lambda x: x["s"]) for name, r in runs.items()}
    # the re-run's output against a full import of the same repository
    move(nexts)
    try:
        subprocess.run([cli, "convert", "--entire", str(repo), "--out", str(out), "--quiet"], check=True, env=ENV)
        subprocess.run([cli, "convert", "--entire", str(repo), "--out", str(work / "out-full"), "--quiet", "--full"],
                       check=True, env=ENV)
        identical = same_output(out, work / "out-full")
    finally:
        move(refs)
    # what the output holds of the repository, and the output converted again from it alone (the
    # repository rebuilt from git_objects, as an upgrade without the repository does)
    sizes = {name: folder_mb(path) for name, path in (("output", work / "out-full"), ("output_files", work / "out-files"),
                                                       ("git_objects", work / "out-full" / "git_objects"))}
    rebuilt = work / "out-rebuilt"
    shutil.rmtree(rebuilt, ignore_errors=True)
    best["rebuild"] = timed([cli, "convert", str(work / "out-full"), "--out", str(rebuilt), "--quiet"])
    rebuilt_identical = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), str(work / "out-full"), str(rebuilt),
         "--exclude", "sessions.source_last_read_at", "--exclude", "sessions.source_present"],
        stdout=subprocess.DEVNULL, check=False).returncode == 0
    ratio = best["import"]["s"] / (best["cat_file"]["s"] + best["convert_files"]["s"])
    full = best["import"]
    result = {
        "size_mb": args.size_mb, "checkpoints_per_session": args.checkpoints, "chunk_mb": args.chunk_mb,
        "sessions": built["sessions"], "checkpoints": built["checkpoints"], "blobs_read": len(built["blobs_read"]),
        "repository_mb": round(repo_mb, 1), "transcripts_mb": round(files_mb, 1), "build_s": round(build_s, 1),
        **{f"{k}_s": round(v["s"], 2) for k, v in best.items()},
        **{f"{k}_cpu_s": round(v["cpu_s"], 2) for k, v in best.items()},
        **{f"{k}_other_cpu_s": round(v["other_cpu_s"], 2) for k, v in best.items() if v["other_cpu_s"] is not None},
        "ratio": round(ratio, 2), "target": 1.3, "grown_session_mb": built["grown_session_mb"],
        "reuse": reuse, "rerun_identical_to_full": identical, "runs": runs,
        **{f"{k}_mb": round(v, 1) for k, v in sizes.items()}, "rebuilt_identical": rebuilt_identical,
        "cpus": os.cpu_count(), "load_average": os.getloadavg(),
    }
    print(f"repository {repo_mb:.1f} MiB ({built['checkpoints']} checkpoints of {built['sessions']} sessions), "
          f"transcripts converted {files_mb:.1f} MiB")
    for name, label in (("cat_file", "git cat-file --batch"), ("convert_files", "convert the folder"),
                        ("import", "import the repository"), ("rerun_unchanged", "re-run, nothing changed"),
                        ("rerun_new_checkpoint", "re-run, one new checkpoint"),
                        ("rebuild", "the output converted again")):
        b = best[name]
        share = f"  {b['s'] / full['s']:6.1%} / {b['cpu_s'] / full['cpu_s']:6.1%} of the import" if "rerun" in name \
            else ""
        other = f", others {b['other_cpu_s']:.1f} CPU s" if b["other_cpu_s"] is not None else ""
        print(f"{label:26}{b['s']:7.2f} s wall, {b['cpu_s']:6.2f} s CPU{other}{share}")
    print(f"import / (read + convert) {ratio:7.2f}   (target <= 1.3)   load average {os.getloadavg()[0]:.1f}")
    for name, summary in reuse.items():
        print(f"{name}: groups reused {summary['session_groups_reused']}, "
              f"converted {summary['session_groups_converted']}, final stage {summary['final_stage']}")
    print(f"new checkpoint of a {built['grown_session_mb']} MiB session; the re-run's output "
          f"{'equals' if identical else 'DIFFERS from'} a full import")
    print(f"output {sizes['output']:.1f} MiB, of which git_objects {sizes['git_objects']:.1f} MiB; the folder's "
          f"output {sizes['output_files']:.1f} MiB; converted again from the output alone (the repository rebuilt "
          f"from it): {'equal' if rebuilt_identical else 'DIFFERENT'}")
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / f"entire-{size}mb.json").write_text(json.dumps(result, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
