"""Shared helpers of every test folder: where the checkout and its fixtures are, authored Claude Code
lines, a JSONL writer, converter runners, readers of an output, the command line run in-process."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType

import polars as pl
from polars.testing import assert_frame_equal
import pytest

import batch
from batch import sql
from batch.cli import main
from batch.schema import TABLES

SID = "11111111-1111-4111-8111-111111111111"
SID2 = "22222222-2222-4222-8222-222222222222"
CWD = "/home/user/project"
VERSION = "2.1.39"
MODEL = "claude-opus-4-6"
ROOT = Path(__file__).parent.parent  # the checkout
FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus"
# Claude Code 2.1.158-2.1.199 (tests/fixtures/corpus/README.md): the fields the older corpus lacks
NEW_CORPUS = CORPUS / "claude-code-2.1.1xx"
NEW_SESSIONS = tuple(sorted(p.stem for p in NEW_CORPUS.rglob("*.jsonl")))
SAMPLE = ROOT / "data" / "sample"


def small_sample(dest: Path) -> Path:
    """A copy of the demo sample's Claude Code transcripts at `dest` without its largest project, for
    speed: 5 session groups, one with subagents (the Codex rollouts of codex/ left out)."""
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns("-Users-gray-phantom-reads", "codex"))
    return dest


def older(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows of the corpus before 2.1.158: streams of the sessions outside NEW_CORPUS (subagents included)."""
    return frame.filter(~pl.col("session_key").str.split("/").list.first().is_in(NEW_SESSIONS))


def rows(frame: pl.DataFrame, **where) -> pl.DataFrame:
    """The rows of `frame` whose columns equal the given values (None matches null)."""
    return frame.filter(pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in where.items()))


def one(frame: pl.DataFrame, **where) -> dict:
    """The one row of `frame` matching `where`, as a dict."""
    found = rows(frame, **where)
    assert found.height == 1, (where, found.height)
    return found.row(0, named=True)


def part_native(t: dict, part: dict) -> object:
    """The block a part names, read back from its line's verbatim JSON (docs/asr-tables.md, Exact JSON)."""
    line = one(t["source_lines"], source_file=part["source_file"], line=part["source_line"], sub=part["source_sub"])
    text = line["native"] if line["native"] is not None else one(t["records"], record_id=line["record_id"])["native"]
    value = json.loads(text)
    for key, index in re.findall(r"\.(\w+)|\[(\d+)\]", part["native_path"].removeprefix("$")):
        value = value[key] if key else value[int(index)]
    return value


def uid(n: int) -> str:
    """A deterministic lowercase UUID for line n."""
    return f"00000000-0000-4000-8000-{n:012d}"


def envelope(type_: str, uuid: str | None, parent: str | None, ts: str, sid: str = SID, **extra) -> dict:
    """The common envelope of a chain entry, in the key order Claude Code 2.1.39 writes."""
    obj = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": sid,
        "version": VERSION,
        "gitBranch": "main",
        "type": type_,
    }
    obj.update(extra)
    if uuid is not None:
        obj["uuid"] = uuid
    obj["timestamp"] = ts
    return obj


def user(uuid: str, parent: str | None, text: str, ts: str = "2026-02-12T20:30:00.000Z", **kw) -> dict:
    return envelope("user", uuid, parent, ts, message={"role": "user", "content": text}, **kw)


def usage(output: int, *, input_: int = 6, cache_write: int | None = 100, cache_read: int | None = 50,
          split: bool = True) -> dict:
    u = {"input_tokens": input_}
    if cache_write is not None:
        u["cache_creation_input_tokens"] = cache_write
    if cache_read is not None:
        u["cache_read_input_tokens"] = cache_read
    if split:
        u["cache_creation"] = {"ephemeral_5m_input_tokens": cache_write or 0, "ephemeral_1h_input_tokens": 0}
    u["output_tokens"] = output
    u["service_tier"] = "standard"
    return u


def assistant(uuid: str, parent: str | None, msg_id: str, blocks: list[dict], *, output: int = 3,
              stop: str | None = None, ts: str = "2026-02-12T20:30:01.000Z", model: str = MODEL,
              request_id: str | None = "req_011CPzYuqyBehXVMovbsLhUW", usage_: dict | None = None,
              sid: str = SID, **kw) -> dict:
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage_ if usage_ is not None else usage(output),
    }
    extra = {"message": message}
    if request_id is not None:
        extra["requestId"] = request_id
    extra.update(kw)
    return envelope("assistant", uuid, parent, ts, sid=sid, **extra)


def tool_result(uuid: str, parent: str | None, call_id: str, text: str = "ok", *,
                ts: str = "2026-02-12T20:30:02.000Z", result: object = None, sid: str = SID, **kw) -> dict:
    return envelope(
        "user", uuid, parent, ts, sid=sid,
        message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}]},
        toolUseResult=result if result is not None else {"stdout": text, "stderr": "", "interrupted": False},
        **kw,
    )


THINKING = {"type": "thinking", "thinking": "Let me look.", "signature": "sig=="}
TEXT = {"type": "text", "text": "I'll list the files."}


def tool_use(call_id: str = "toolu_01A", name: str = "Bash", cmd: str = "ls") -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"command": cmd}}


def dumps(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))


def write_jsonl(path: Path, items: list, *, newline_at_end: bool = True) -> Path:
    """Write objects (dicts) and raw lines (str or bytes, written as is) one per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    chunks = []
    for item in items:
        if isinstance(item, bytes):
            chunks.append(item)
        elif isinstance(item, str):
            chunks.append(item.encode("utf-8"))
        else:
            chunks.append(dumps(item).encode("utf-8"))
    data = b"\n".join(chunks) + (b"\n" if newline_at_end and chunks else b"")
    path.write_bytes(data)
    return path


def fault_env(step: str, *, stalled: Path | None = None, once: Path | None = None) -> dict[str, str]:
    """The environment of a process (and of the Dask workers it starts) that kills itself at `step`
    of a run, or stalls there (`stall:<step>`, creating `stalled`), or does so once (`once:<step>`,
    creating `once`): tests/faults/sitecustomize.py, on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_BATCH_FAULT")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).parent / "faults"), env.get("PYTHONPATH")) if p)
    env["ASR_BATCH_FAULT"] = step
    if stalled is not None:
        env["ASR_BATCH_FAULT_STALLED"] = str(stalled)
    if once is not None:
        env["ASR_BATCH_FAULT_ONCE"] = str(once)
    return env


def read_tables(out: Path) -> dict[str, pl.DataFrame]:
    """Every output table of `out`, read from out/<table>/*.parquet."""
    return {t.name: pl.read_parquet(out / t.name / "*.parquet") for t in TABLES}


def sorted_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of `df` in one order that does not depend on how they were written."""
    keys = [c for c, dt in df.schema.items() if not isinstance(dt, pl.List)]
    return df.sort(keys, nulls_last=True)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` with its bytes (relative paths)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_folders(out: Path) -> list[str]:
    """The run folders beside `out` (`.<out>.asr-run-<hex>`), by name."""
    from batch.output.folder import RUN_INFIX

    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}{RUN_INFIX}"))


def read_manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def timeless(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` without `sessions.source_last_read_at`, the one column that depends on when a run
    ran rather than on its input (docs/asr-tables.md, "Keeping history")."""
    return frame.drop("source_last_read_at", strict=False)


def assert_tables_equal(got: Path, want: Path) -> None:
    """Every output table of `got` equal, row by row, to `want`'s, but for `sessions.source_present`
    and `source_last_read_at` (which say where and when a session's source was read)."""
    a_tables, b_tables = read_tables(got), read_tables(want)
    for t in TABLES:
        a = timeless(a_tables[t.name]).drop("source_present", strict=False)
        b = timeless(b_tables[t.name]).drop("source_present", strict=False)
        try:
            assert_frame_equal(sorted_rows(a), sorted_rows(b), check_row_order=True)
        except AssertionError as exc:
            raise AssertionError(f"table {t.name}: {exc}") from None


def assert_same_as_full(src: Path, out: Path, tmp_path: Path, **kw) -> dict:
    """`out` holds every table and the manifest a full conversion of `src` into a new folder gives
    (but for the manifest's `reuse`); return out's reuse summary."""
    full = tmp_path / "full"
    shutil.rmtree(full, ignore_errors=True)
    batch.convert([src], full, full=True, **kw)
    got, want = read_tables(out), read_tables(full)
    for t in TABLES:
        assert_frame_equal(sorted_rows(timeless(got[t.name])), sorted_rows(timeless(want[t.name])), check_row_order=True)
    mine, wanted = read_manifest(out), read_manifest(full)
    summary = mine.pop("reuse")
    wanted.pop("reuse")
    # what this run replaced, carried or repaired of the previous output, and the part files it
    # wrote (named by batch), are said of the run, not of the input
    for key in ("replaced", "carried", "damaged", "files"):
        mine.pop(key, None), wanted.pop(key, None)
    assert mine == wanted
    return summary


def run(src: Path | list[Path], out: Path, **kw) -> dict[str, pl.DataFrame]:
    """Convert `src` into `out` with batch.convert and return every table as a Polars frame."""
    sources = src if isinstance(src, list) else [src]
    batch.convert(sources, out, **kw)
    return read_tables(out)


@pytest.fixture(scope="session")
def corpus_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real corpus (tests/fixtures/corpus), converted once for the whole session; read only."""
    out = tmp_path_factory.mktemp("corpus") / "out"
    batch.convert([CORPUS], out)
    return out


@pytest.fixture(scope="session")
def corpus_tables(corpus_out: Path) -> Mapping[str, pl.DataFrame]:
    """Every output table of the converted corpus, read once for the whole session; read only (the
    mapping refuses changes, and no test changes a frame in place: Polars methods return new frames)."""
    return MappingProxyType(read_tables(corpus_out))


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """A Claude Code project folder."""
    folder = tmp_path / "projects" / "-home-user-project"
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "asr-out"


# the command line, run in-process
def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main([*args])
    captured = capsys.readouterr()
    code = exc.value.code
    return (0 if code is None else code), captured.out, captured.err


def assert_one_error_line(err: str, *fragments: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("Error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], err


def wide_columns() -> list[str]:
    """The text columns of `classified` that records_full.sql keeps out of its observations (its
    `exclude` list): the JSON text, message.content, the top-level content, toolUseResult, the text head."""
    lists = set(re.findall(r"exclude \(([^)]*)\)", sql.load("records_full")))
    assert len(lists) == 1, lists
    return sorted(c.strip() for c in lists.pop().split(","))


def walk_roots(parents: Mapping[str, str | None]) -> dict[str, str]:
    """Each stream's root: its parent followed up, through a parent that is not a key of `parents`."""
    roots = {}
    for key in parents:
        node = key
        while parents.get(node) is not None:
            node = parents[node]
        roots[key] = node
    return roots


# Codex usage by the rule of ../shared reference codex-format.md §9.6, written out over parsed lines
CODEX_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens")


def codex_responses(objects: list[dict]) -> list[dict]:
    """The §9.6 rule: each distinct (total, last) pair of the five classic fields once, skipping null
    info, empty total or last, and placeholders (last input and output both 0); each response's last usage."""
    seen, out = set(), []
    for obj in objects:
        p = obj.get("payload") or {}
        if obj.get("type") != "event_msg" or p.get("type") != "token_count" or not p.get("info"):
            continue
        total, last = p["info"].get("total_token_usage") or {}, p["info"].get("last_token_usage") or {}
        if not all(k in total for k in CODEX_FIELDS) or not all(k in last for k in CODEX_FIELDS):
            continue
        key = tuple(total[k] for k in CODEX_FIELDS) + tuple(last[k] for k in CODEX_FIELDS)
        if key in seen or (last["input_tokens"] == 0 and last["output_tokens"] == 0):
            continue
        seen.add(key)
        out.append(last)
    return out


def convert_streams(files: list, **constants) -> tuple[dict[str, pl.DataFrame], list, list]:
    """The Claude Code converter (formats/claude_code/converter.py) run on `files` on a DuckDB
    connection of its own, with the converter's constants given set for the call: its tables as
    frames (read from each relation it hands over to be written), its inputs and its skipped streams."""
    import tempfile

    import duckdb

    from batch.formats.claude_code import converter

    with pytest.MonkeyPatch.context() as patch:
        for name, value in constants.items():
            patch.setattr(converter, name, value)
        con = duckdb.connect()
        con.execute("set temp_directory = $path", {"path": tempfile.mkdtemp()})
        sql.define_macros(con)
        tables = {}

        def write(name, relation, restore):
            frame = con.sql(f'select * from "{relation}"').pl()
            tables[name] = frame if restore is None else restore(frame)

        result = converter.convert(con, files, write=write)
        con.close()
    return tables, result.inputs, result.skipped


@contextmanager
def narrow_only(con):
    """Within it, `classified` on `con` (the Claude Code converter's observations) has no wide column
    (`wide_columns`), and records_full and batch_parts are not defined: a statement that reads one
    fails by its name."""
    columns = {c for c, in con.sql("select column_name from (describe classified)").fetchall()}
    views = {n for n, in con.sql("select view_name from duckdb_views() where temporary").fetchall()}
    hidden = [n for n in ("records_full", "batch_parts") if n in sql.defined(con)]
    con.execute("alter table classified rename to classified_whole")
    wide = ", ".join(c for c in wide_columns() if c in columns)
    con.execute(f"create temp view classified as select * exclude ({wide}) from classified_whole")
    for name in hidden:
        con.execute(f'alter {"view" if name in views else "table"} "{name}" rename to "{name}_hidden"')
    try:
        yield
    finally:
        con.execute("drop view classified")
        con.execute("alter table classified_whole rename to classified")
        for name in hidden:
            con.execute(f'alter {"view" if name in views else "table"} "{name}_hidden" rename to "{name}"')
