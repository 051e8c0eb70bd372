"""Command line: parse options, call the library, render. The only module that imports typer."""

from __future__ import annotations

import datetime as dt
import errno
import os
import signal
import sys
import threading
import tempfile
import time
import traceback
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from batch.errors import BatchError, Interrupted
from batch.pipeline import ConvertResult, convert
from batch.run.memory import DEFAULT_BATCH_BYTES, DEFAULT_WORKERS
from batch.schema import TABLES_BY_NAME, markdown
from batch.sources import registry
from batch.version import VERSION
from batch.watch import WATCH_DEBOUNCE_MS, WATCH_QUIET_MS, watch_and_convert
from batch import query as q
from batch import report as reports
from batch.output.catalog import built_root, open_catalog, refresh_catalog, view_files, views_markdown

app = typer.Typer(
    help="Convert AI coding-agent transcript archives into ASR Parquet tables for DuckDB.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"asr-batch {VERSION}")
        raise typer.Exit()


_options = {"debug": False, "caught": {}}


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of an internal error instead of saving it to a file.")
    ] = False,
) -> None:
    """Convert AI coding-agent transcript archives into ASR Parquet tables for DuckDB."""
    _options["debug"] = debug


# The options of `convert`, declared once here so that convert_cmd reads as its steps.
_Sources = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Claude Code projects folders or .jsonl files, and Git repositories holding Entire checkpoints "
        "(working tree, bare or mirror), Codex sessions folders or rollout files. Default: every agent's location "
        "that exists: $CLAUDE_CONFIG_DIR/projects (else ~/.claude/projects), $CODEX_HOME/sessions and "
        "$CODEX_HOME/archived_sessions (else ~/.codex/...).",
        show_default=False,
    ),
]
_Out = Annotated[Path, typer.Option("--out", "-o", help="Output folder; replaced atomically.")]
_Entire = Annotated[
    list[Path] | None,
    typer.Option(
        "--entire", metavar="REPO", show_default=False,
        help="A Git repository to import Entire checkpoints from (repeatable); any repository among the "
        "sources is imported too.",
    ),
]
_EntireEvents = Annotated[
    list[Path] | None,
    typer.Option(
        "--entire-events", metavar="PATH", show_default=False,
        help="A JSONL file of Entire agent-protocol lifecycle events (hook data), or a folder of them "
        "(repeatable); events join the session they name.",
    ),
]
_AllCheckpoints = Annotated[
    bool,
    typer.Option(
        "--all-checkpoints",
        help="Read every checkpoint of each Entire session, not only the newest; "
        "records they share are written once.",
    ),
]
_BatchMb = Annotated[
    int,
    typer.Option(
        "--batch-mb", min=1,
        help="Input MiB per batch; a larger session is a batch of its own. Memory grows with workers x batch size; "
        "a batch of more than 64 MiB keeps its text in temporary files instead.",
    ),
]
_Workers = Annotated[
    int | None,
    typer.Option(
        "--workers", "-j", min=1, show_default=False,
        help=f"Batches converted at once. Default: one per CPU, at most {DEFAULT_WORKERS}.",
    ),
]
_Executor = Annotated[
    str,
    typer.Option(
        "--executor",
        help="Where batches run: local (threads of this process), dask (Dask worker processes on this machine, "
        "--workers of them) or a Dask scheduler's address, tcp://HOST:PORT, whose workers see the inputs and OUT "
        "under the same paths. dask needs: pip install 'asr-batch\\[dask]'.",
    ),
]
_MemoryMb = Annotated[
    int | None,
    typer.Option(
        "--memory-mb", min=64, show_default=False,
        help="DuckDB's memory limit per batch, in MiB. Default: 768 for a batch of more than 64 MiB, else "
        "DuckDB's own (80% of the machine's memory). A session that does not fit is a declared loss.",
    ),
]
_Full = Annotated[
    bool,
    typer.Option(
        "--full",
        help="Convert every session whose files are there again, reusing none of their rows in OUT (the "
        "sessions whose sources are gone are still kept).",
    ),
]
_Verify = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Reuse a session of a previous output only when its files' SHA-256 are unchanged too, "
        "not only their size and modification time, and its part files in OUT are those OUT's manifest "
        "records; sessions whose sources are gone and that no intact copy holds are dropped as declared losses.",
    ),
]
_Prune = Annotated[
    bool,
    typer.Option(
        "--prune",
        help="Drop the sessions of OUT whose sources are gone (deleted, moved away or not given this time); "
        "by default OUT keeps them.",
    ),
]
_Watch = Annotated[
    bool,
    typer.Option(
        "--watch",
        help=f"After converting, watch the sources and convert again {WATCH_QUIET_MS / 1000:g} s after they "
        f"last changed ({WATCH_DEBOUNCE_MS / 1000:g} s after the first change at most, while they keep changing), "
        "until Ctrl-C or SIGTERM.",
    ),
]
_Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors (no warnings).")]
_Prices = Annotated[
    Path | None,
    typer.Option(
        "--prices", metavar="FILE", show_default=False,
        help="A CSV of prices laid out like data/pricing.csv: its rows price their models in the catalog from "
        "their effective dates, over genai-prices' list prices and the shipped data/pricing.csv.",
    ),
]


@app.command("convert")
def convert_cmd(
    sources: _Sources = None,
    out: _Out = Path("asr-out"),
    entire: _Entire = None,
    entire_events: _EntireEvents = None,
    all_checkpoints: _AllCheckpoints = False,
    batch_mb: _BatchMb = DEFAULT_BATCH_BYTES >> 20,
    workers: _Workers = None,
    executor: _Executor = "local",
    memory_mb: _MemoryMb = None,
    full: _Full = False,
    verify: _Verify = False,
    prune: _Prune = False,
    prices: _Prices = None,
    watch: _Watch = False,
    quiet: _Quiet = False,
) -> None:
    """Convert transcripts into OUT/<table>/*.parquet, OUT/manifest.json and OUT/asr.duckdb.

    Over a previous output, sessions whose files kept their size and modification time are reused, and only the
    others are converted again. Sessions OUT holds whose sources are gone are kept (--prune drops them), so OUT
    keeps every session it was ever given.
    """
    paths = _source_paths(sources, entire, entire_events)
    if not sources and not quiet and all(p.is_dir() for p in paths) and paths:
        typer.echo("Reading the default locations: " + ", ".join(str(p) for p in paths), err=True)
    warn = None if quiet else lambda message: typer.echo("Warning: " + message, err=True)

    def run(progress=None) -> ConvertResult:
        return convert(
            paths, out, entire=list(entire or ()), entire_events=list(entire_events or ()),
            all_checkpoints=all_checkpoints, batch_bytes=batch_mb << 20,
            workers=workers, executor=executor, full=full, verify=verify, prune=prune, progress=progress, warn=warn,
            memory_bytes=memory_mb << 20 if memory_mb else None, prices=prices,
        )

    def first() -> None:
        _convert_once(run, quiet)

    if not watch:
        first()
        return
    watch_and_convert(
        paths + list(entire or ()) + list(entire_events or ()), run, echo=typer.echo, quiet=quiet,
        stopped=lambda: "signum" in _options["caught"], first=first,
    )


def _source_paths(
    sources: list[Path] | None, entire: list[Path] | None, entire_events: list[Path] | None
) -> list[Path]:
    """The sources to convert: those given, else none when Entire inputs are given, else every agent's
    default location that exists (registry.default_sources)."""
    return list(sources) if sources else ([] if entire or entire_events else registry.default_sources())


def _convert_once(run, quiet: bool) -> None:
    """Run one conversion with a progress bar and print its summary, unless quiet."""
    with _progress(quiet) as progress:
        result = run(progress)
    if not quiet:
        typer.echo(_summary(result))


@app.command("sql")
def sql_cmd(
    out: Annotated[Path, typer.Argument(help="An output folder written by `asr-batch convert`.")],
    query: Annotated[
        str | None,
        typer.Argument(
            help="SQL to run over the tables and views. Omit it for an interactive prompt "
            "(or to read the SQL from a pipe).",
            show_default=False,
        ),
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the SQL from this file.", show_default=False)
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="table, csv, json (an array of objects) or markdown.")
    ] = "table",
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help=f"Rows to print at most. Default: {q.TABLE_LIMIT} for table, all otherwise."),
    ] = None,
    timezone: Annotated[
        str,
        typer.Option("--timezone", "--tz", help="Time zone of the local days of usage_by_day and cache_hit_ratio: "
                     f"an IANA name (Europe/Paris) or {reports.LOCAL} (this machine's)."),
    ] = "UTC",
) -> None:
    """Query an output folder with DuckDB, read-only: every table and view available by name."""
    if fmt not in q.FORMATS:
        raise BatchError(f"--format {fmt}: use one of {', '.join(q.FORMATS)}.")
    text = _sql_text(query, file)
    con = open_catalog(out)
    try:
        _moved_note(con, out)
        reports.use_timezone(con, timezone)
        if text is None:
            import readline  # noqa: F401  (line editing and history for input())

            q.shell(con, read=input, write=typer.echo, error=lambda line: typer.echo(line, err=True))
            return
        result = q.run(con, text)
        if result is None:
            return
        if (message := q.note(result)) is not None:
            typer.echo(message, err=True)
        q.render(result, fmt, limit=limit, write=typer.echo)
    finally:
        con.close()


def _sql_text(query: str | None, file: Path | None) -> str | None:
    """The SQL to run: the argument, the --file, or a pipe on stdin; None for an interactive prompt."""
    if query is not None and file is not None:
        raise BatchError("pass the SQL either as an argument or with --file, not both.")
    if file is not None:
        try:
            return file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BatchError(f"{file}: cannot be read ({getattr(exc, 'strerror', None) or exc}).") from exc
    if query is not None:
        return query
    if sys.stdin is None or sys.stdin.isatty():
        return None
    return sys.stdin.read()


def _moved_note(con, out: Path) -> None:
    built = built_root(con)
    if built is not None and Path(built).resolve() != out.resolve():
        typer.echo(
            f"Note: this output was built in {built}; `asr-batch sql` reads it where it is, "
            f"`duckdb {out / 'asr.duckdb'}` only after `asr-batch catalog {out}`.",
            err=True,
        )


@app.command("report")
def report_cmd(
    out: Annotated[Path, typer.Argument(help="An output folder written by `asr-batch convert`.")],
    period: Annotated[
        str,
        typer.Argument(help="daily, monthly, session (a main session with its subagents) or project "
                       "(the main session's working directory)."),
    ] = "daily",
    since: Annotated[
        dt.datetime | None,
        typer.Option("--since", formats=["%Y-%m-%d"], help="First local day counted (YYYY-MM-DD).", show_default=False),
    ] = None,
    until: Annotated[
        dt.datetime | None,
        typer.Option("--until", formats=["%Y-%m-%d"], help="Last local day counted (YYYY-MM-DD).", show_default=False),
    ] = None,
    timezone: Annotated[
        str,
        typer.Option("--timezone", "--tz", help="Time zone of the local days: an IANA name (Europe/Paris, UTC) "
                     f"or {reports.LOCAL} (this machine's)."),
    ] = reports.LOCAL,
    fmt: Annotated[
        str, typer.Option("--format", help="table, csv, json (an array of objects) or markdown.")
    ] = "table",
) -> None:
    """Tokens and cost per local day, month, session or project, and whether each cost is a lower bound.

    Costs add the priced responses only, at the prices of the response's UTC day; a period with a response
    of an unpriced model, or without its final usage, is a lower bound (is_lower_bound).
    """
    if fmt not in q.FORMATS:
        raise BatchError(f"--format {fmt}: use one of {', '.join(q.FORMATS)}.")
    con = open_catalog(out)
    try:
        _moved_note(con, out)
        zone = reports.use_timezone(con, timezone)
        result = reports.report(con, period, since=since and since.date(), until=until and until.date())
        if period in ("daily", "monthly"):
            typer.echo(f"Local days in {zone} (--timezone)", err=True)
        q.render(result, fmt, limit=None if fmt != "table" else 1 << 62, write=typer.echo)
    finally:
        con.close()


@app.command("catalog")
def catalog_cmd(
    out: Annotated[Path, typer.Argument(help="An output folder written by `asr-batch convert`.")],
    prices: _Prices = None,
) -> None:
    """Rewrite OUT/asr.duckdb for where the folder is now, after moving or copying it, and with the prices
    of the genai-prices installed (and of --prices)."""
    path = refresh_catalog(out, prices=prices)
    typer.echo(f"Rewrote {path}: `duckdb {path}` reads the tables in {path.parent}.")


@app.command("schema")
def schema_cmd(
    name: Annotated[
        str | None,
        typer.Argument(help="A table or view to describe. Omit it for every table and column, and every view "
                       "with its grain.", show_default=False),
    ] = None,
) -> None:
    """Print the output's tables and views as Markdown: every table's columns and the views' grains, or one."""
    if name is None:
        typer.echo(markdown() + "\n" + views_markdown())
    elif name in TABLES_BY_NAME:
        typer.echo(markdown(name))
    elif name in view_files():
        typer.echo(views_markdown(name))
    else:
        raise BatchError(f"{name}: no table or view of that name. `asr-batch schema` lists them all.")


class _progress:
    """A progress bar on stderr, fed with bytes converted; silent when quiet or not a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet or not sys.stderr.isatty()
        self.bar = None

    def __enter__(self):
        if self.quiet:
            return None
        return self._update

    def _update(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = typer.progressbar(length=max(total, 1), label="converting", file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.bar.pos)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


def _summary(r: ConvertResult) -> str:
    mib = r.input_bytes / (1 << 20)
    con = open_catalog(r.out)
    try:
        totals = reports.totals(con)
    finally:
        con.close()
    lines = [
        f"Converted {r.inputs} files ({mib:.1f} MiB, {r.lines} lines) in {r.seconds:.1f}s into {r.out}",
        *([_entire_summary(r.manifest["entire"])] if "entire" in r.manifest else []),
        *([_reuse_summary(r.manifest["reuse"])] if r.manifest["reuse"]["session_groups_reused"] else []),
        *_kept_summary(r.manifest["reuse"]),
        *_carried_summary(r.manifest.get("carried")),
        *_as_written_summary(r.manifest.get("as_written") or []),
        *_damaged_summary(r.manifest.get("damaged")),
        *([f"  replaced the earlier lines of {len(r.manifest['replaced'])} rewritten or removed files "
           "(manifest.json `replaced`)"] if r.manifest.get("replaced") else []),
        f"  rejected lines {r.rejected_lines}  foreign files {r.foreign_files}  {_losses_summary(totals.losses)}",
        *_totals_summary(totals),
        f"Query it: asr-batch report {r.out}   or   asr-batch sql {r.out} \"select ...\"   "
        f"(DuckDB 1.1 or later: duckdb {r.out / 'asr.duckdb'}; pip install duckdb-cli)",
    ]
    return "\n".join(lines)


def _losses_summary(losses: tuple[tuple[str, int], ...]) -> str:
    """The categories of declared losses (what the transcripts do not say), the most frequent first."""
    if not losses:
        return "declared losses none"
    shown = ", ".join(f"{category} {n}" for category, n in losses[:4])
    more = f" and {len(losses) - 4} more" if len(losses) > 4 else ""
    return f"declared losses (streams per category; table losses): {shown}{more}"


def _totals_summary(t: reports.Totals) -> list[str]:
    """The two lines an analyst reads first: sessions and inferences, then their cost."""
    subagents = f" and {t.subagents} subagent streams" if t.subagents else ""
    cost = "no priced response" if t.cost_usd is None else f"${t.cost_usd:,.2f}"
    why = [f"{t.unpriced_models} models unpriced"] * (t.unpriced_models > 0)
    why += [f"{t.incomplete} responses without their final usage counts"] * (t.incomplete > 0)
    bound = f", a lower bound ({'; '.join(why)})" if why else ""
    return [
        f"Total: {t.sessions} sessions{subagents}, {t.inferences:,} inferences, {t.tokens:,} tokens",
        f"       cost {cost}{bound}",
    ]


def _reuse_summary(reuse: dict) -> str:
    """What an incremental run took from the previous output."""
    checked = "size, modification time and SHA-256" if reuse["verified"] else "size and modification time"
    deltas = reuse.get("deltas", {})
    appended = deltas.get("session_groups", 0) - deltas.get("rewritten", 0)
    grown = f", {appended} of them grown, their earlier rows kept where unchanged" if appended else ""
    return (
        f"  reused {reuse['session_groups_reused']} unchanged sessions ({reuse['inputs_reused']} files, by {checked}); "
        f"converted {reuse['session_groups_converted']}{grown} (--full converts all)"
    )


def _kept_summary(reuse: dict) -> list[str]:
    """The sessions the output keeps, or dropped, whose sources this run did not find."""
    lines = []
    if reuse.get("session_groups_kept"):
        lines.append(f"  kept {reuse['session_groups_kept']} sessions whose sources are gone (--prune drops them)")
    if reuse.get("session_groups_not_converted"):
        lines.append(f"  not converted: {reuse['session_groups_not_converted']} sessions that need more memory than "
                     "this run may use (losses memory.session_not_converted; --memory-mb raises it)")
    if reuse.get("session_groups_pruned"):
        lines.append(f"  pruned {reuse['session_groups_pruned']} sessions whose sources are gone")
    return lines


def _carried_summary(carried: dict | None) -> list[str]:
    """The sessions rebuilt from earlier outputs (an output of another version, or outputs given as inputs)."""
    if not carried:
        return []
    lines = []
    for source in carried["from"]:
        n, by = len(source["session_groups"]), f"asr-batch {source['written_by']['version']}"
        repos = source.get("repositories") or []
        rebuilt = (f"; the Git {'repository' if len(repos) == 1 else 'repositories'} {', '.join(repos)} rebuilt "
                   "from its copy" if repos else "")
        if not n and not repos:  # its sessions all given again, or carried as written (below)
            continue
        if source["output"] == "(the previous output)":
            lines.append(f"  carried {n} kept sessions forward from an output of {by} (converted again from its copy of "
                         f"their files{rebuilt})")
        else:
            lines.append(f"  converted {n} sessions from {source['output']}, an output of {by}{rebuilt}")
    if carried["inexact"]:
        lines.append(f"  {len(carried['inexact'])} files rebuilt from an output are not byte for byte the files "
                     "as read (manifest.json `carried.inexact`)")
    if carried["not_carried"]:
        lines.append(f"  not carried: {len(carried['not_carried'])} files an earlier output holds without their bytes "
                     "(manifest.json `carried.not_carried`)")
    return lines


def _as_written_summary(entries: list[dict]) -> list[str]:
    """The sessions whose rows are an earlier version's, as it wrote them (their bytes are not held)."""
    by: dict[str, int] = {}
    for e in entries:
        by[e["written_by"]] = by.get(e["written_by"], 0) + 1
    return [
        f"  {n} sessions as {written} wrote them: the output does not hold the bytes they were converted from "
        "(manifest.json `as_written`)"
        for written, n in sorted(by.items())
    ]


def _damaged_summary(damaged: dict | None) -> list[str]:
    """The previous output's damaged part files, and what became of the sessions they held."""
    if not damaged:
        return []
    lines = [
        f"  {len(damaged['files'])} part files of the previous output were damaged or missing: "
        f"{damaged['session_groups_converted']} sessions converted again from their files, "
        f"{len(damaged['session_groups_rebuilt'])} from the output's copy of their files"
    ]
    if damaged["session_groups_lost"]:
        lines.append(f"  lost {len(damaged['session_groups_lost'])} sessions whose sources are gone and that no intact "
                     "copy holds (losses archive.part_damaged; manifest.json `damaged`)")
    return lines


def _entire_summary(entire: dict) -> str:
    """What the Entire import read, and its source losses by kind (missing objects, corrupt JSON, other)."""
    repos = entire["repositories"]
    losses = entire["source_losses"]
    missing = sum(n for k, n in losses.items() if k in ("entire.missing_blob", "entire.missing_session_folder"))
    corrupt = losses.get("entire.corrupt_metadata", 0)
    other = sum(losses.values()) - missing - corrupt
    where = repos[0]["repository"] if len(repos) == 1 else f"{len(repos)} repositories"
    return (
        f"  Entire {where}: {sum(r['checkpoints'] for r in repos)} checkpoints, "
        f"{sum(r['sessions'] for r in repos)} sessions, {sum(r['commit_trailers'] for r in repos)} commit trailers; "
        f"source losses {sum(losses.values())} (missing objects {missing}, corrupt JSON {corrupt}, other {other})"
    )


# typer vendors click; its UsageError (bad option, missing argument) is BadParameter's base.
_UsageError = typer.BadParameter.__mro__[1]
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# write failures a user can fix: a full disk, a quota, a read-only file system
_FULL_OR_READ_ONLY = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


def main(argv: list[str] | None = None) -> None:
    """Run the CLI.

    A user error is one `Error: ...` line and exit code 1. SIGINT, SIGTERM and SIGHUP stop the run,
    remove its unfinished output and exit 128 + the signal number. Anything else is a bug: one
    line saying so and where its traceback was saved (`--debug` shows it), and exit code 2.
    """
    _options["debug"] = False
    caught: dict[str, int] = {}
    _options["caught"] = caught
    previous = _catch_signals(caught)
    try:
        code = app(args=argv, standalone_mode=False)
    except (BatchError, _UsageError) as exc:
        message = exc.format_message() if isinstance(exc, _UsageError) else str(exc)
        typer.echo("Error: " + " ".join(message.split()), err=True)
        raise SystemExit(1) from None
    except Interrupted as exc:
        _stopped(exc.signum)
    except typer.Abort:  # end of input at a prompt
        typer.echo("Error: stopped; the previous output, if any, is unchanged.", err=True)
        raise SystemExit(130) from None
    except Exception as exc:
        if "signum" in caught:
            # the signal surfaced as another exception (DuckDB turns it into "query interrupted")
            _stopped(caught["signum"])
        if _options["debug"]:
            raise
        if isinstance(exc, OSError) and exc.errno in _FULL_OR_READ_ONLY:
            where = f" ({exc.filename})" if exc.filename else ""
            typer.echo(
                f"Error: cannot write{where}: {exc.strerror}. Free some space or pass another --out; "
                "the previous output, if any, is unchanged.",
                err=True,
            )
            raise SystemExit(1) from None
        saved = _save_traceback(exc)
        first = " ".join(str(exc).split())[:300]
        typer.echo(
            f"Error: internal error in asr-batch {VERSION} ({type(exc).__name__}: {first}). This is a bug, not a "
            f"problem with your input. The traceback is in {saved}; please report it with that file "
            "(or run again with --debug to see it).",
            err=True,
        )
        raise SystemExit(2) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    raise SystemExit(code if isinstance(code, int) else 0)


def _stopped(signum: int) -> NoReturn:
    name = signal.Signals(signum).name
    typer.echo(f"Error: stopped by {name}; the previous output, if any, is unchanged.", err=True)
    raise SystemExit(128 + signum) from None


def _catch_signals(caught: dict[str, int]) -> dict:
    """Turn the first SIGINT, SIGTERM or SIGHUP into `Interrupted` (noted in `caught`); ignore the
    ones during cleanup."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum, frame):
        if "signum" in caught:
            return
        caught["signum"] = signum
        raise Interrupted(signum)

    return {signum: signal.signal(signum, handler) for signum in _SIGNALS}


def _save_traceback(exc: BaseException) -> str:
    path = Path(tempfile.gettempdir()) / f"asr-batch-error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    text = f"asr-batch {VERSION}, python {sys.version.split()[0]}, argv {sys.argv!r}\n\n" + "".join(
        traceback.format_exception(exc)
    )
    try:
        path.write_text(text, encoding="utf-8")
    except OSError:
        return "(could not be saved: run again with --debug)"
    return str(path)


if __name__ == "__main__":
    main()
