"""Another commit of this repository as a converter of its own, timed against the checkout.

    python bench/baseline.py REF    # build (or find) REF's virtual environment and print its asr-batch

`build(REF)` exports REF with `git archive`, installs it (not editable, without its dependencies)
into a virtual environment under `bench/baseline/<full commit>/`, and keeps that environment for the
next run. The environment reads its libraries from the running interpreter's site-packages (a `.pth`
file), so both converters run on the same installed polars, duckdb and pyarrow and the figures differ
by the converter's code alone; nothing but REF's build backend is downloaded. `bench/run.py
--baseline REF` then times REF and the checkout alternately (`order`) and prints `report`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / "baseline"
TARGET = {"wall": 0.6, "cpu": 0.5}  # new / baseline, in wall and in CPU seconds
# differs between any two converts by design: when each one read its sources
EXCLUDE = ("sessions.source_last_read_at",)


@dataclass(frozen=True)
class Baseline:
    commit: str
    command: list[str]  # asr-batch of REF's environment
    env: dict[str, str]  # this process's environment without PYTHONPATH, which would import the checkout


def resolve(ref: str) -> str:
    """The full hash of the commit REF names in this repository."""
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=ROOT,
                           capture_output=True, text=True, check=False)
    if found.returncode != 0:
        raise SystemExit(f"baseline: {ref!r} names no commit of this repository ({ROOT})")
    return found.stdout.strip()


def build(ref: str, *, verbose: bool = True) -> Baseline:
    """REF installed in its own virtual environment, built once per commit and kept under bench/baseline/."""
    commit = resolve(ref)
    home = CACHE / commit
    venv = home / "venv"
    ready = home / "ready.json"
    if not ready.is_file():
        if verbose:
            print(f"baseline  building {commit[:12]} in {home} ...", file=sys.stderr)
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        with tempfile.TemporaryDirectory(dir=home) as src:
            archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True,
                                     check=True).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(src, filter="data")
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            python = venv / "bin" / "python"
            site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip()
            # after the environment's own site-packages: REF's `batch` comes first, the libraries from here
            libraries = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
            (Path(site) / "_bench_libraries.pth").write_text("".join(f"{p}\n" for p in libraries), encoding="utf-8")
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            "--no-deps", src], check=True, env=_clean_env())
        ready.write_text(json.dumps({"commit": commit}) + "\n", encoding="utf-8")
    baseline = Baseline(commit, [str(venv / "bin" / "asr-batch")], _clean_env())
    imported = subprocess.run([str(venv / "bin" / "python"), "-c", "import batch; print(batch.__file__)"], cwd="/",
                              capture_output=True, text=True, check=True, env=baseline.env).stdout.strip()
    if not Path(imported).resolve().is_relative_to(venv.resolve()):
        raise SystemExit(f"the baseline environment imports batch from {imported}, not from {venv}")
    return baseline


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def order(pairs: int) -> list[str]:
    """Which converter runs when: the baseline first in every pair, so both meet the same drift."""
    return ["baseline", "new"] * max(1, pairs)


def best(runs: list[dict]) -> dict:
    """The least wall and the least CPU seconds of a converter's runs (each the least noisy figure of
    its own; the kernel's share from the run with the least CPU), and the highest peak."""
    cpu = min(runs, key=lambda r: r["cpu_seconds"])
    return {
        "seconds": min(r["seconds"] for r in runs),
        "cpu_seconds": cpu["cpu_seconds"],
        "user_cpu_seconds": cpu["cpu_seconds"] - cpu["system_cpu_seconds"],
        "system_cpu_seconds": cpu["system_cpu_seconds"],
        "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
        "all_seconds": [r["seconds"] for r in runs],
        "all_cpu_seconds": [r["cpu_seconds"] for r in runs],
        # CPU seconds other processes took during each run: how loaded the machine was
        "all_other_cpu_seconds": [r.get("other_cpu_seconds") for r in runs],
    }


def ratios(base: dict, new: dict) -> dict:
    """new / baseline in wall and in CPU seconds, and whether each meets TARGET."""
    wall, cpu = new["seconds"] / base["seconds"], new["cpu_seconds"] / base["cpu_seconds"]
    return {"wall": wall, "cpu": cpu, "wall_met": wall <= TARGET["wall"], "cpu_met": cpu <= TARGET["cpu"],
            "peak": new["peak_rss_mib"] / base["peak_rss_mib"]}


def report(label: str, base: dict, new: dict) -> list[str]:
    """The lines `bench/run.py` prints: each converter's figures, then the ratios against the targets."""
    lines = []
    for name, r in ((label, base), ("checkout", new)):
        runs = ", ".join(f"{s:.1f}" for s in r["all_seconds"])
        lines.append(f"          {name}: {r['seconds']:.2f} s wall, {r['cpu_seconds']:.2f} s CPU ({r['user_cpu_seconds']:.2f}"
                     f" user, {r['system_cpu_seconds']:.2f} kernel), peak RSS {r['peak_rss_mib']:.0f} MiB (runs: {runs} s)")
    q = ratios(base, new)
    lines.append(f"          checkout / baseline = {q['wall']:.2f} wall, {q['cpu']:.2f} in CPU seconds, {q['peak']:.2f} "
                 f"in peak (target <= {TARGET['wall']:g} in wall: {'met' if q['wall_met'] else 'NOT met'}; "
                 f"<= {TARGET['cpu']:g} in CPU: {'met' if q['cpu_met'] else 'NOT met'})")
    return lines


def compare(before: Path, after: Path, exclude: tuple[str, ...] = ()) -> tuple[bool, list[str]]:
    """bench/compare.py on two outputs, without the columns that differ by design (and `exclude`): whether
    they hold the same tables row for row, and the lines that say what differs."""
    cmd = [sys.executable, str(ROOT / "bench" / "compare.py"), str(before), str(after), "--show", "0",
           *(f"--exclude={c}" for c in (*EXCLUDE, *exclude))]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = proc.stdout.splitlines()
    if proc.returncode not in (0, 1) or not lines:
        raise SystemExit(f"bench/compare.py failed: {proc.stderr.strip()}")
    return proc.returncode == 0, [line for line in lines if line.startswith("DIFF")]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Build (or find) a commit's own virtual environment under "
                                             "bench/baseline/ and print the asr-batch command it runs.")
    ap.add_argument("ref", help="a commit of this repository: a hash, a tag or a branch")
    print(" ".join(build(ap.parse_args().ref).command))
