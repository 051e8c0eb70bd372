"""Every source and every format, registered in one place: the pipeline asks this module what the
inputs are and which converter reads a stream, and imports no source or format itself.

A source finds its inputs and gives units of work (batch/sources/base.py): Claude Code files
(`sources/claude_code`), Codex rollout files among them, told apart by their first line (`sources/codex`), Entire checkpoints in Git repositories (`formats/entire_checkpoint`, over
`sources/entire`), files of Entire lifecycle events (`formats/entire_events`) and earlier asr-batch
outputs, whose files are rebuilt from their own tables (`sources/archive`). A format converts
the streams of one batch (`Stream.producer_source`) into frames of the output and work tables.
Adding a source: a branch in `discover` (and `given_roots`); adding a format: a line in `FORMATS`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from batch.errors import SourceError
from batch.formats import claude_code, codex, entire_checkpoint, entire_events
from batch.formats.codex import report as codex_report
from batch.sources import archive
from batch.sources import codex as codex_files
from batch.schema.entire import TABLES as ENTIRE_TABLES
from batch.sources.base import Unit
from batch.sources.files import FileTable
from batch.sources.claude_code import NO_TOOL_RESULTS, Discovery, ToolResults, default_source
from batch.sources.claude_code import discover as discover_files
from batch.sources.git import is_repository

# The converter of each stream format (Stream.producer_source): one registration line per format.
# A converter turns the streams of one batch into frames of the output and work tables.
FORMATS = {
    claude_code.FORMAT: claude_code.convert, entire_events.FORMAT: entire_events.convert, codex.FORMAT: codex.convert,
}
# Output tables of the final stage that sources fill once per run (Entire checkpoints and trailers).
RUN_TABLES = ENTIRE_TABLES


@dataclass
class Inputs:
    """Every source's discovery: units of work, and what sources contribute once per run."""

    found: Discovery
    units: list[Unit]
    imports: list[entire_checkpoint.Import]
    event_heads: dict[str, list] = field(default_factory=dict)  # EventFiles.heads
    archives: list[archive.Archive] = field(default_factory=list)  # earlier outputs read
    carried: dict[str, archive.Archive] = field(default_factory=dict)  # owner -> the output its unit is rebuilt from
    tool_results: ToolResults = NO_TOOL_RESULTS  # the names of the tool-results/ files found, in a file


def given_roots(sources: list[Path], entire: list[Path] | tuple[Path, ...], events: list[Path] | tuple[Path, ...]
                ) -> list[Path]:
    """The folders and files a run reads, as far as known before discovery (a repository by its Git
    folder: an output in its working tree is fine); a path that is not a repository is left to
    discovery, which says what is wrong with it."""
    given = [*sources, *events, *(p for p in entire if is_repository(p))]
    return [git_folder(p) if is_repository(p) else p.resolve() for p in given]


def discover(
    sources: list[Path], entire: list[Path], *, combine: bool, events: list[Path] = (),
    known: Iterable[tuple[str, object]] | None = None, known_events: dict | None = None, previous: Path | None = None, folder: Path | None = None,
) -> Inputs:
    """Ask each source for its units: Git repositories hold Entire checkpoints, asr-batch outputs the
    files they were converted from, other paths Claude Code files and Codex rollouts (a .jsonl file
    whose first line is a Codex session_meta is read as Codex). `known` and `known_events`: the heads
    of Claude Code files and of event files a previous discovery read (`claude_code.discover`,
    `entire_events.discover`). `previous`: the output being replaced, read as a source (its reuse
    state is another version's): it gives the groups no other input gives. `folder`: where the files
    found are held (`FileTable`; a temporary folder when None)."""
    repos = [p for p in sources if is_repository(p)] + entire
    outputs = [p for p in sources if p not in repos and archive.is_output(p)]
    paths = [p for p in sources if p not in repos and p not in outputs]
    files = FileTable(folder, refine=codex_files.refine)  # a rollout is told by its first line
    found = discover_files(paths, known=known, files=files) if paths else Discovery(files)
    # one import per repository, however often and however spelled it is named
    unique = {git_folder(p): p for p in reversed(repos)}
    imports = [entire_checkpoint.discover(repo, combine=combine) for repo in reversed(unique.values())]
    for imp in imports:
        # what is read of a repository is its Git folder: an output in its working tree is fine
        folder = git_folder(imp.root)
        if folder not in found.roots:
            found.roots.append(folder)
    all_units = found.files.units() + [u for imp in imports for u in imp.units]
    event_heads = {}
    if events:  # files of Entire lifecycle events, named with --entire-events
        event_units, event_files = entire_events.discover(events, known=known_events)
        all_units += event_units
        found.skipped += event_files.skipped
        found.roots += [r for r in event_files.roots if r not in found.roots]
        event_heads = event_files.heads
    archives = [archive.discover(p) for p in outputs]
    found.roots += [a.root for a in archives if a.root not in found.roots]
    if previous is not None and archive.is_output(previous):  # only the groups no other input gives
        given = {u.owner for u in all_units} | {u.owner for a in archives for u in a.units}
        archives.append(archive.discover(previous, exclude=given))
    for arch in archives:
        imports += carry_repositories(arch, {imp.repository for imp in imports})
    inputs = Inputs(found, all_units, imports, event_heads, archives)
    carried = _carry(inputs)
    # the tool-results/ names, once in the run folder for every task to read (discovery's, and those of
    # the outputs groups are carried from)
    inputs.tool_results = ToolResults.write(
        files.folder, ToolResults.read(found.tool_result_names), *(sorted(arch.tool_results) for arch in carried))
    if found.tool_result_names is not None:
        found.tool_result_names.unlink()
        found.tool_result_names = None
    return inputs


def carry_repositories(arch: archive.Archive, given: set[str]) -> list[entire_checkpoint.Import]:
    """Read the repositories the output `arch` holds, rebuilt from its copy, as a repository is read,
    and take their sessions into `arch`'s units; but a repository named in `given` (read from where it is
    now, or from an output named before), whose sessions it does not give are not carried."""
    imports = []
    for held in arch.repositories:
        if held.name in given:
            archive.carry_repository(arch, held, [], {})
            continue
        imp = entire_checkpoint.discover(held.path, combine=held.combine)
        archive.carry_repository(arch, held, imp.units, imp.summary)
        imports.append(imp)
        given = given | {held.name}
    return imports


def check_readable(out: Path) -> None:
    """Refuse an output folder written by a newer asr-batch (an archive format this version cannot read)."""
    archive.written_by(out)


def _carry(inputs: Inputs) -> list[archive.Archive]:
    """Add the archives' units of the groups no other input gives: a group's files as they are now win
    over an output's copy of them, and an output named first over the next (the one replaced last).
    The archives some of whose groups are carried."""
    owners, carried = {u.owner for u in inputs.units}, []
    for arch in inputs.archives:
        for unit in arch.units:
            if unit.owner not in owners:
                inputs.units.append(unit)
                inputs.carried[unit.owner] = arch
                owners.add(unit.owner)
        if arch.units and any(inputs.carried.get(u.owner) is arch for u in arch.units):
            carried.append(arch)
    return carried


def git_folder(path: Path) -> Path:
    # a working tree and its .git folder are one repository
    return (path / ".git").resolve() if (path / ".git").is_dir() else path.resolve()


def default_sources() -> list[Path]:
    """Every agent's default location that exists: Claude Code's projects folder, Codex's sessions
    and archived sessions; raise when none does."""
    locations = [default_source(), *codex_files.default_sources()]
    found = [p for p in locations if p.is_dir()]
    if not found:
        raise SourceError(
            f"no transcripts in the default locations: none of {', '.join(str(p) for p in locations)} exists "
            "(Claude Code's $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects; Codex's $CODEX_HOME/sessions and "
            "archived_sessions, else ~/.codex/...). Pass the folders or .jsonl files to convert: "
            "asr-batch convert PATH --out DIR."
        )
    return found


def nothing_found_message(sources: list[Path], found: Discovery, imports: list[entire_checkpoint.Import]) -> str:
    where = ", ".join(str(s) for s in sources) or ", ".join(str(i.root) for i in imports)
    if imports and not found.files and len(imports) == len(found.roots):
        return (
            f"no Entire checkpoints found in {where}: looked for the entire/checkpoints/v1 branch (and its "
            "remote-tracking copies) and refs/entire/checkpoints/<shard>/<id>. Fetch them first "
            "(git fetch origin entire/checkpoints/v1:entire/checkpoints/v1) or pass a Claude Code projects folder."
        )
    hint = ""
    repos = [str(r) for r in found.roots if r.is_dir() and ((r / ".git").exists() or (r / "HEAD").is_file())]
    if repos:
        hint = f" {repos[0]} is a Git repository: asr-batch reads Claude Code transcript folders, not repositories."
    seen = f" ({len(found.skipped)} other files or folders were looked at and skipped)" if found.skipped else ""
    return (
        f"no transcripts found in {where}{seen}: looked for Claude Code sessions (<project>/<session id>.jsonl "
        f"files and their subagents' agent-*.jsonl) and Codex rollouts (.jsonl files whose first line is "
        f"session_meta).{hint} Pass ~/.claude/projects, a project folder, ~/.codex/sessions or .jsonl files."
    )


def run_key(imports: list[entire_checkpoint.Import]) -> str:
    """What the rows sources give once per run depend on (a re-run with the same key reuses them)."""
    return entire_checkpoint.run_key(imports)


def current_provenance(inputs: list[dict], imports: list[entire_checkpoint.Import]) -> list[dict]:
    """A reused batch's manifest inputs with the provenance this run's scans give."""
    return entire_checkpoint.current_provenance(inputs, imports)


def run_frames(imports: list[entire_checkpoint.Import]) -> dict[str, list[pl.DataFrame]]:
    """The frames of the tables sources fill once per run, by table."""
    frames: dict[str, list[pl.DataFrame]] = {}
    for imp in imports:
        for name, frame in imp.frames.items():
            frames.setdefault(name, []).append(frame)
    return frames


def export_report(
    versions: list[str], absent: object, imports: list[entire_checkpoint.Import], source_losses: dict[str, int],
    codex_versions: list[str] | None = None,
) -> tuple[dict, dict]:
    """The manifest's `export_report` (what each format says of its mapping: usage selection,
    coverage, unassigned facts, retention; `codex` when Codex rollouts were read, with their
    `codex_versions`) and the manifest's entries of the sources read once per
    run (`entire`: the repositories and the losses their scans found)."""
    report = {
        "usage_selection": claude_code.USAGE_SELECTION,
        "coverage": {**claude_code.COVERAGE, "versions_in_input": versions},
        "unassigned_facts": claude_code.UNASSIGNED,
        "retention": {"policy": claude_code.RETENTION, "absent_files": absent},
    }
    extra = {}
    if codex_versions is not None:  # the run read Codex rollouts
        report["codex"] = codex_report.export_report(codex_versions)
    if imports:
        report["entire"] = entire_checkpoint.EXPORT_REPORT
        extra["entire"] = {"repositories": [imp.summary for imp in imports], "source_losses": source_losses}
    return report, extra
