"""Command line: exit codes, one `Error:` line per user error, help texts, sql and --version."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

import batch
from conftest import FIXTURES, ROOT, SID, TEXT, assert_one_error_line, assistant, invoke, uid, user, write_jsonl


@pytest.fixture
def converted(src: Path, out: Path) -> Path:
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "hello"),
        assistant(uid(2), uid(1), "msg_01A", [TEXT], output=12, stop="end_turn"),
    ])
    batch.convert([src], out)
    return out


def test_convert_prints_a_summary_and_writes_the_output(capsys, src, out):
    lines = [
        user(uid(1), None, "hello"),
        assistant(uid(2), uid(1), "msg_01A", [TEXT], output=12, stop="end_turn"),
        user(uid(3), uid(2), "again"),
        assistant(uid(4), uid(3), "msg_01B", [TEXT], output=30, stop="end_turn"),
    ]
    write_jsonl(src / f"{SID}.jsonl", lines)
    code, stdout, err = invoke(capsys, "convert", str(src), "--out", str(out))
    assert code == 0, err
    assert "Converted 1 files" in stdout
    assert json.loads((out / "manifest.json").read_text())["tables"]["records"] == 4
    assert (out / "asr.duckdb").is_file()
    # the totals: every token of both responses' usage, whose model has a price
    tokens = sum(v for line in lines if line["type"] == "assistant" for k, v in line["message"]["usage"].items()
                 if k in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    total, cost = stdout.splitlines()[-3:-1]
    assert total == f"Total: 1 sessions, 2 inferences, {tokens:,} tokens"
    # the same cost as the daily report's (whose arithmetic tests/sql/test_views.py checks)
    code, report, _ = invoke(capsys, "report", str(out), "--format", "json", "--tz", "UTC")
    assert code == 0
    assert cost.split()[:2] == ["cost", f"${sum(day['cost_usd'] for day in json.loads(report)):,.2f}"]
    assert stdout.splitlines()[-1].startswith(f"Query it: asr-batch report {out}")


def test_convert_quiet_prints_nothing(capsys, src, out):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    code, stdout, err = invoke(capsys, "convert", str(src), "--out", str(out), "--quiet")
    assert (code, stdout, err) == (0, "", "")


def test_a_session_larger_than_a_batch_is_one_warning_line(capsys, src, out):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "x" * (2 << 20))])
    code, stdout, err = invoke(capsys, "convert", str(src), "--out", str(out), "--batch-mb", "1")
    assert code == 0, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Warning: 1 session holds more than the batch size (1 MiB)"), err
    assert f"{SID} (2.0 MiB)" in lines[0] and "needs roughly 398 MiB of memory." in lines[0]  # 384 + 7 x 2
    assert "available" not in lines[0]  # this machine has more than 398 MiB free
    assert "Converted 1 files" in stdout
    code, stdout, err = invoke(capsys, "convert", str(src), "--out", str(out), "--batch-mb", "1", "-q")
    assert (code, stdout, err) == (0, "", "")


def test_a_session_larger_than_the_free_memory_is_told(capsys, src, out, monkeypatch):
    import batch.run.memory

    monkeypatch.setattr(batch.run.memory, "available_memory", lambda: 100 << 20)
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "x" * (2 << 20))])
    code, stdout, err = invoke(capsys, "convert", str(src), "--out", str(out), "--batch-mb", "1")
    assert code == 0, err
    assert err.splitlines()[0].endswith(
        "needs roughly 398 MiB of memory. This machine has about 100 MiB available: the conversion may run out of memory."
    ), err


def test_missing_source_is_one_error_line(capsys, tmp_path, out):
    missing = tmp_path / "no-such-folder"
    code, stdout, err = invoke(capsys, "convert", str(missing), "--out", str(out), "-q")
    assert code == 1
    assert stdout == ""
    assert_one_error_line(err, str(missing))
    assert not out.exists()


PRICE_HEADER = ("model,effective_date,input_usd_per_mtok,output_usd_per_mtok,cache_write_5m_usd_per_mtok,"
                "cache_write_1h_usd_per_mtok,cache_read_usd_per_mtok,source,checked_on")


def test_a_bad_price_file_is_refused_before_converting(capsys, src, tmp_path, out):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    prices = tmp_path / "prices.csv"
    prices.write_text("model,price\nclaude-opus-4-6,1\n")
    code, _, err = invoke(capsys, "convert", str(src), "--out", str(out), "--prices", str(prices), "-q")
    assert code == 1
    assert_one_error_line(err, f"{prices}:1: the header must be {PRICE_HEADER}")
    assert not out.exists()


def test_convert_prices_from_a_price_file_also_over_an_unchanged_output(capsys, converted, src, tmp_path):
    def prices() -> list[tuple]:
        with duckdb.connect(str(converted / "asr.duckdb"), read_only=True) as con:
            return con.sql("select model, effective_date::varchar, input_usd_per_mtok::double, source "
                           "from model_prices order by all").fetchall()

    # genai-prices 0.2.5: $5 per million input tokens ($10 over 200,000), flat $5 from 2026-03-13
    before = prices()
    assert [row[:3] for row in before] == [
        ("claude-opus-4-6", "0001-01-01", 5.0), ("claude-opus-4-6", "0001-01-01", 10.0),
        ("claude-opus-4-6", "2026-03-13", 5.0),
    ]
    file = tmp_path / "prices.csv"
    file.write_text(PRICE_HEADER + "\nclaude-opus-4-6,2026-01-01,1,2,3,4,0.5,mine,2026-01-02\n")
    # nothing changed: the final stage and the catalog would be reused, but the price file rebuilds the catalog
    code, _, err = invoke(capsys, "convert", str(src), "--out", str(converted), "--prices", str(file), "-q")
    assert (code, err) == (0, "")
    # the file's row takes the model over from 2026-01-01: genai-prices' later change is dropped
    assert prices() == [*before[:2], ("claude-opus-4-6", "2026-01-01", 1.0, "mine")]


@pytest.mark.parametrize("module", ["batch", "batch.cli"])
def test_missing_source_through_python_m(tmp_path, module):
    missing = tmp_path / "no-such-folder"
    proc = subprocess.run(
        [sys.executable, "-m", module, "convert", str(missing), "--out", str(tmp_path / "out"), "-q"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert_one_error_line(proc.stderr, str(missing))


@pytest.mark.parametrize(
    "args",
    [
        ("convert", "--bogus"),
        ("convert", "--batch-mb", "0"),
        ("convert", "--batch-mb", "many"),
        ("sql",),
        ("no-such-command",),
    ],
    ids=["unknown-option", "batch-mb-below-min", "batch-mb-not-int", "sql-missing-out", "unknown-command"],
)
def test_bad_usage_is_one_error_line(capsys, args):
    code, stdout, err = invoke(capsys, *args)
    assert code == 1
    assert_one_error_line(err)


def test_unwritable_out_is_one_error_line(capsys, src, tmp_path):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, stdout, err = invoke(capsys, "convert", str(src), "--out", str(blocker / "out"), "-q")
    assert code == 1
    assert_one_error_line(err, "--out")
    assert blocker.read_text() == "not a folder"


def test_out_that_is_a_file_is_one_error_line(capsys, src, tmp_path):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    target = tmp_path / "out.txt"
    target.write_text("keep me")
    code, _, err = invoke(capsys, "convert", str(src), "--out", str(target), "-q")
    assert code == 1
    assert_one_error_line(err, "not a folder")
    assert target.read_text() == "keep me"


def test_non_empty_folder_without_manifest_is_refused(capsys, src, tmp_path):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.md").write_text("mine")
    code, _, err = invoke(capsys, "convert", str(src), "--out", str(target), "-q")
    assert code == 1
    assert_one_error_line(err, "not an asr-batch output")
    assert [p.name for p in target.iterdir()] == ["notes.md"]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("convert", ["--out", "output folder", "--batch-mb", "mib per batch", "--quiet", "sources", "asr-batch[dask]",
                     "projects folders", "--prices", "data/pricing.csv"]),
        ("sql", ["--limit", "rows to print", "out", "query", "sql to run"]),
        ("schema", ["markdown", "table or view"]),
        ("report", ["daily", "monthly", "--since", "--until", "--timezone", "--format", "lower bound"]),
    ],
)
def test_every_command_has_help_describing_its_options(capsys, command, expected):
    code, stdout, err = invoke(capsys, command, "--help")
    assert code == 0, err
    assert stdout.strip()
    assert err == ""
    for word in expected:
        assert word in stdout.lower(), (word, stdout)


def test_root_help_lists_the_commands(capsys):
    code, stdout, _ = invoke(capsys, "--help")
    assert code == 0
    for command in ("convert", "sql", "report", "schema", "catalog"):
        assert command in stdout


def test_sql_prints_a_query_result(capsys, converted):
    code, stdout, err = invoke(capsys, "sql", str(converted), "select count(*) as n from records")
    assert code == 0, err
    lines = stdout.splitlines()
    assert lines[0].strip() == "n"
    assert lines[2].strip() == "2"


def test_sql_sees_every_table(capsys, converted):
    code, stdout, err = invoke(
        capsys, "sql", str(converted), "select inference_id, output_total_tokens from inferences"
    )
    assert code == 0, err
    assert "msg_01A" in stdout
    assert "12" in stdout


def test_sql_on_a_folder_without_manifest_is_one_error_line(capsys, tmp_path):
    folder = tmp_path / "not-an-output"
    folder.mkdir()
    code, stdout, err = invoke(capsys, "sql", str(folder), "select 1")
    assert code == 1
    assert stdout == ""
    assert_one_error_line(err, "manifest.json")


def test_sql_with_a_bad_query_is_one_error_line(capsys, converted):
    code, _, err = invoke(capsys, "sql", str(converted), "select nope from records")
    assert code == 1
    assert_one_error_line(err, "query failed")


def test_schema_prints_every_table_and_view(capsys):
    code, stdout, _ = invoke(capsys, "schema")
    assert code == 0
    for table in ("sessions", "records", "parts", "inferences", "source_lines", "rejects", "lineage"):
        assert f"### `{table}`" in stdout
    views = sorted(p.stem for p in (ROOT / "sql" / "views").glob("*.sql"))
    assert [line.split("`")[1] for line in stdout.split("### Views", 1)[1].splitlines() if line.startswith("| `")] == views


def test_schema_describes_one_table_or_view(capsys):
    code, stdout, _ = invoke(capsys, "schema", "sessions")
    assert code == 0 and stdout.startswith("### `sessions`") and "### `records`" not in stdout
    code, stdout, _ = invoke(capsys, "schema", "usage_by_day")
    assert code == 0
    # the columns of the view's final select, in order
    text = (ROOT / "sql" / "views" / "usage_by_day.sql").read_text()
    final = text.split("final as (", 1)[1].split("from located", 1)[0]
    names = [line.strip().rstrip(",").split(" as ")[-1] for line in final.splitlines()[2:] if line.strip()]
    assert [line.split("`")[1] for line in stdout.splitlines() if line.startswith("| `")] == names
    code, _, err = invoke(capsys, "schema", "usage_by_week")
    assert code == 1
    assert_one_error_line(err, "usage_by_week: no table or view")


def test_version_prints_the_version(capsys):
    code, stdout, err = invoke(capsys, "--version")
    assert code == 0
    assert stdout.strip() == f"asr-batch {batch.__version__}"
    assert err == ""


def test_convert_without_a_path_reads_every_default_location_that_exists(capsys, tmp_path, monkeypatch):
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    write_jsonl(claude / "projects" / "p" / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    rollout = json.loads((FIXTURES / "codex" / "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl")
                         .read_text().splitlines()[0])["payload"]["id"]
    shutil.copytree(FIXTURES / "codex", codex / "sessions" / "2026" / "02" / "23",
                    ignore=lambda d, names: [n for n in names if "019c8a70" not in n])
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("CODEX_HOME", str(codex))
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke(capsys, "convert")
    assert code == 0, err
    assert f"Reading the default locations: {claude / 'projects'}, {codex / 'sessions'}" in err
    sessions = pl.read_parquet(tmp_path / "asr-out" / "sessions" / "*.parquet")
    assert sorted(zip(sessions["session_key"], sessions["agent"])) == sorted([(SID, "claude-code"), (rollout, "codex")])


def test_convert_without_a_path_names_every_default_location_when_none_exists(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke(capsys, "convert")
    assert code == 1
    assert_one_error_line(err, str(tmp_path / "claude" / "projects"), str(tmp_path / "codex" / "sessions"),
                          str(tmp_path / "codex" / "archived_sessions"), "CODEX_HOME")
    assert not (tmp_path / "asr-out").exists()


def test_an_empty_folder_names_both_agents_looked_for(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = invoke(capsys, "convert", str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    assert code == 1
    assert_one_error_line(err, "no transcripts found", "Claude Code sessions", "Codex rollouts")
