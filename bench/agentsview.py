"""asr-batch against agentsview on the same Claude Code folder: a full conversion and a full sync, alternated.

    python bench/agentsview.py [--archive DIR | --size-mb 256] [--corpus] [--rounds 2]

agentsview (https://pypi.org/project/agentsview/, a Go program that syncs agents' sessions into
SQLite) is installed at version `VERSION` into bench/agentsview/venv on first use. It reads
`~/.claude/projects`: each sync runs with a HOME of its own, a new folder whose `.claude/projects` is
the archive, so that it syncs everything into a database of its own (`~/.agentsview`), with
`AGENTSVIEW_NO_DAEMON=1` (a one-shot run, no background server). Each asr-batch run converts the
same folder into a new output (`--full`). The two alternate, `--rounds` times each; each run's wall
and CPU seconds (its process and children, from `getrusage`) and peak RSS come from the wrapper
bench/run.py times converts with, and the fastest run of each is reported, with the ratios.

The archive is the generated one of `--size-mb` (bench/generate.py: real lines, ids rewritten;
generated when missing) unless `--archive` names a projects folder; `--corpus` adds the real corpus
(tests/fixtures/corpus) laid out as `projects/<project>/...` (bench/ccusage_compare.py). Results go to
bench/results/agentsview-<name>.json. They do not write the same thing: agentsview keeps sessions and
messages for its viewer, asr-batch the ASR tables, the manifest and the catalog.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import generate  # noqa: E402
from ccusage_compare import lay_out  # noqa: E402
from run import WRAPPER, converter_command, machine  # noqa: E402

VERSION = "0.46.1"
VENV = HERE / "agentsview" / "venv"


def install() -> Path:
    """The agentsview executable of `VERSION`, installed into `VENV` when missing."""
    binary = VENV / "bin" / "agentsview"
    marker = VENV / f".agentsview-{VERSION}"
    if not marker.is_file():
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", f"agentsview=={VERSION}"],
                       check=True)
        marker.touch()
    return binary


def measured(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Run `cmd` under bench/run.py's wrapper: wall and CPU seconds (with children), peak RSS."""
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, check=False, env=env)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if report["rc"] != 0:
        raise SystemExit(f"failed with exit code {report['rc']}: {' '.join(cmd)}")
    return {"seconds": report["seconds"], "cpu_seconds": report["cpu_seconds"],
            "peak_rss_mib": report["maxrss_kib"] / 1024}


def sync(binary: Path, projects: Path, scratch: Path) -> dict:
    """A full agentsview sync of `projects`, in a HOME of its own."""
    home = scratch / "home"
    shutil.rmtree(home, ignore_errors=True)
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "projects").symlink_to(projects.resolve())
    env = {**os.environ, "HOME": str(home), "AGENTSVIEW_NO_DAEMON": "1"}
    result = measured([str(binary), "sync"], env)
    db = next(iter(sorted((home / ".agentsview").rglob("*.db"))), None)
    result["database_mib"] = db.stat().st_size / (1 << 20) if db else None
    shutil.rmtree(home, ignore_errors=True)
    return result


def convert(projects: Path, scratch: Path) -> dict:
    """A full asr-batch conversion of `projects` into a new output."""
    out = scratch / "out"
    shutil.rmtree(out, ignore_errors=True)
    result = measured([*converter_command(), "convert", str(projects), "--out", str(out), "--quiet", "--full"])
    result["output_mib"] = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / (1 << 20)
    shutil.rmtree(out, ignore_errors=True)
    return result


def compare(name: str, projects: Path, binary: Path, rounds: int) -> dict:
    runs: dict[str, list[dict]] = {"asr-batch": [], "agentsview": []}
    with tempfile.TemporaryDirectory(prefix="asr-agentsview-") as tmp:
        scratch = Path(tmp)
        for _ in range(rounds):  # alternated: the machine's load falls on both alike
            runs["agentsview"].append(sync(binary, projects, scratch))
            runs["asr-batch"].append(convert(projects, scratch))
    best = {k: min(v, key=lambda r: r["seconds"]) for k, v in runs.items()}
    mib = sum(f.stat().st_size for f in projects.rglob("*.jsonl")) / (1 << 20)
    ratios = {k: best["asr-batch"][k] / best["agentsview"][k] for k in ("seconds", "cpu_seconds", "peak_rss_mib")}
    print(f"{name}: {mib:,.0f} MiB of transcripts, fastest of {rounds} alternated runs each")
    print(f"  {'':12} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}")
    for k, r in best.items():
        print(f"  {k:12} {r['seconds']:8.2f} {r['cpu_seconds']:8.2f} {r['peak_rss_mib']:9.0f}")
    print(f"  asr-batch / agentsview: wall {ratios['seconds']:.2f}, CPU {ratios['cpu_seconds']:.2f}, "
          f"peak {ratios['peak_rss_mib']:.2f} (target: wall and CPU below 1)")
    return {"archive": str(projects), "mib": mib, "agentsview_version": VERSION, "runs": runs, "best": best,
            "ratios": ratios, "faster_in_wall_and_cpu": ratios["seconds"] < 1 and ratios["cpu_seconds"] < 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archive", type=Path, help="a projects folder (default: the generated archive of --size-mb)")
    parser.add_argument("--size-mb", type=float, default=256, help="the generated archive's size (default 256)")
    parser.add_argument("--corpus", action="store_true", help="compare on the real corpus too")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each, alternated (default 2)")
    args = parser.parse_args()
    binary = install()
    archive = args.archive
    if archive is None:
        archive = HERE / "archive" / f"{args.size_mb:g}"
        if not generate.stamp_path(archive).is_file():
            generate.generate(args.size_mb, archive, 0, invalid_lines=True, verbose=False)
    results = {"machine": machine(), archive.name: compare(archive.name, archive, binary, args.rounds)}
    if args.corpus:
        with tempfile.TemporaryDirectory(prefix="asr-corpus-") as tmp:
            projects = Path(tmp) / "projects"
            lay_out(HERE.parent / "tests" / "fixtures" / "corpus", projects)
            results["corpus"] = compare("corpus", projects, binary, args.rounds)
    target = HERE / "results" / f"agentsview-{archive.name}.json"
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"results in {target.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
