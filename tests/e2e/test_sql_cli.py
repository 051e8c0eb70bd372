"""`asr-batch sql` and `asr-batch catalog`: formats, input forms, the read-only sandbox, moved outputs."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import batch
from batch.output.catalog import refresh_catalog
from conftest import SID, TEXT, assistant, tool_result, tool_use, uid, user, write_jsonl
from conftest import assert_one_error_line, invoke


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A converted output: two responses (12 and 30 output tokens) and one Bash call."""
    root = tmp_path_factory.mktemp("sql")
    src = root / "projects" / "-home-user-project"
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "hello"),
        assistant(uid(2), uid(1), "msg_01A", [TEXT, tool_use("toolu_01A")], output=12, stop="tool_use"),
        tool_result(uid(3), uid(2), "toolu_01A", "a.txt"),
        assistant(uid(4), uid(3), "msg_01B", [TEXT], output=30, stop="end_turn", ts="2026-02-12T20:30:03.000Z"),
    ])
    out = root / "out"
    batch.convert([src], out)
    return out


@pytest.fixture
def out(built: Path, tmp_path: Path) -> Path:
    """A private copy of the output, which a test may move or probe, its catalog rewritten for it."""
    copy = tmp_path / "out"
    shutil.copytree(built, copy)
    refresh_catalog(copy)
    return copy


def files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_table_is_the_default_format(capsys, out):
    code, stdout, err = invoke(capsys, "sql", str(out), "select inference_id, output_total_tokens from inferences order by 1")
    assert (code, err) == (0, "")
    assert stdout.splitlines() == [
        "inference_id  output_total_tokens",
        "------------  -------------------",
        "msg_01A       12",
        "msg_01B       30",
    ]


def test_views_are_available_by_name(capsys, out):
    code, stdout, err = invoke(capsys, "sql", str(out), "select tool_kind, calls from tool_rates", "--format", "csv")
    assert (code, err) == (0, "")
    assert stdout == "tool_kind,calls\nexecute,1\n"


def test_csv_json_and_markdown(capsys, out):
    query = "select 'a|b' as name, 1.5::double as x, null as n, ['p', 'q'] as l, date '2026-03-01' as d"
    assert invoke(capsys, "sql", str(out), query, "--format", "csv")[1] == 'name,x,n,l,d\na|b,1.5,,"[""p"", ""q""]",2026-03-01\n'
    code, stdout, _ = invoke(capsys, "sql", str(out), query, "--format", "json")
    assert code == 0
    assert json.loads(stdout) == [{"name": "a|b", "x": 1.5, "n": None, "l": ["p", "q"], "d": "2026-03-01"}]
    assert invoke(capsys, "sql", str(out), query, "--format", "markdown")[1] == (
        "| name | x | n | l | d |\n|---|---|---|---|---|\n| a\\|b | 1.5 |  | [\"p\", \"q\"] | 2026-03-01 |\n"
    )


def test_json_of_no_rows_is_an_empty_array(capsys, out):
    code, stdout, _ = invoke(capsys, "sql", str(out), "select * from rejects", "--format", "json")
    assert code == 0 and json.loads(stdout) == []


def test_table_says_when_rows_are_left_out(capsys, out):
    code, stdout, _ = invoke(capsys, "sql", str(out), "select * from range(5)", "--limit", "2")
    assert code == 0
    assert stdout.splitlines()[2:] == ["0", "1", "(first 2 rows shown: raise --limit, or use --format csv for every row)"]
    code, stdout, _ = invoke(capsys, "sql", str(out), "select * from range(5)", "--format", "csv")
    assert stdout.splitlines() == ["range", "0", "1", "2", "3", "4"]


def test_sql_from_a_file(capsys, out, tmp_path):
    path = tmp_path / "q.sql"
    path.write_text("-- the responses\nselect count(*) as n from inferences;\n")
    code, stdout, err = invoke(capsys, "sql", str(out), "--file", str(path), "--format", "csv")
    assert (code, stdout, err) == (0, "n\n2\n", "")


def test_sql_from_a_pipe(capsys, out, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("select count(*) as n from records"))
    code, stdout, _ = invoke(capsys, "sql", str(out), "--format", "csv")
    assert (code, stdout) == (0, "n\n4\n")


def test_interactive_prompt_on_a_terminal(capsys, out, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    lines = iter([".tables", "select 41 +", "1 as answer;", "select nope;", ".quit"])
    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt: next(lines))
    code, stdout, err = invoke(capsys, "sql", str(out))
    assert code == 0
    assert "inference_costs" in stdout and "records" in stdout
    assert "answer\n------\n42\n" in stdout
    assert err.startswith("Error: query failed: Binder Error")


@pytest.mark.parametrize("query", ["", "   \n", "-- only a comment", ";"])
def test_an_empty_query_is_an_error(capsys, out, query):
    code, stdout, err = invoke(capsys, "sql", str(out), "--", query)
    assert (code, stdout) == (1, "")
    assert_one_error_line(err, "the query is empty")


def test_several_statements_say_which_one_is_shown(capsys, out):
    code, stdout, err = invoke(
        capsys, "sql", str(out), "set variable k = 3; select 1 as a; select getvariable('k') + 1 as b", "--format", "csv"
    )
    assert (code, stdout) == (0, "b\n4\n")
    assert err.strip() == "Note: 3 statements ran; the rows shown are those of statement 3: select getvariable('k') + 1 as b"


def test_a_failing_statement_is_named(capsys, out):
    code, _, err = invoke(capsys, "sql", str(out), "select 1; select nope from records")
    assert code == 1
    assert_one_error_line(err, "statement 2 of 2 (select nope from records) failed", "nope")


@pytest.mark.parametrize("statement", [
    "copy (select 1) to '{out}/records/part-99999.parquet'",
    "copy records to '{out}/x.csv'",
    "export database '{out}/export'",
    "attach '{out}/other.duckdb' as other",
    "install httpfs",
    "load httpfs",
    "insert into records select * from records",
])
def test_statements_that_write_are_refused_before_anything_runs(capsys, out, statement):
    before = files(out)
    code, stdout, err = invoke(capsys, "sql", str(out), "select 1; " + statement.format(out=out))
    assert (code, stdout) == (1, "")
    assert_one_error_line(err, "statement 2 of 2 is", "only reads the output", "--format csv")
    assert files(out) == before


@pytest.mark.parametrize("query, fragment", [
    ("select * from read_csv('{outside}')", "disabled by configuration"),
    ("select * from read_text('{out}/../secret.txt')", "disabled by configuration"),
    ("select * from glob('/*')", "disabled by configuration"),
    ("set enable_external_access = true", "locked"),
    ("set allowed_directories = ['/']", "locked"),
    ("create table t as select 1", "read-only"),
    ("drop view records", "read-only"),
])
def test_queries_read_the_output_and_nothing_else(capsys, out, tmp_path, query, fragment):
    outside = tmp_path / "secret.txt"
    outside.write_text("a\n1\n")
    before = files(out)
    code, _, err = invoke(capsys, "sql", str(out), query.format(out=out, outside=outside))
    assert code == 1
    assert_one_error_line(err, fragment)
    assert files(out) == before


def test_queries_leave_the_output_as_it_was(capsys, out):
    before = files(out)
    for query in ("select * from inference_costs", "create temp table t as select * from records; select count(*) from t",
                  "select * from records order by native"):
        assert invoke(capsys, "sql", str(out), query)[0] == 0
    assert files(out) == before


def test_catalog_opens_from_any_working_directory(out, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with duckdb.connect(str(out / "asr.duckdb"), read_only=True) as con:
        assert con.sql("select count(*) from inferences").fetchall() == [(2,)]
        assert con.sql("select sum(output_total_tokens) from usage_by_day").fetchall() == [(42,)]


def test_catalog_opens_in_a_duckdb_1x_command_line(out, tmp_path):
    """The DuckDB command line pip installs (duckdb-cli 1.x, a dev dependency) opens the catalog and
    answers a table and a view: the catalog is written in a storage format every DuckDB since 1.0 reads."""
    cli = Path(sys.executable).parent / "duckdb"
    assert cli.is_file(), "the dev extra installs duckdb-cli 1.x: pip install -e '.[dev]'"
    proc = subprocess.run(
        [str(cli), "-csv", str(out / "asr.duckdb"), "-c",
         "select version() as v, (select count(*) from inferences) as n, "
         "(select sum(output_total_tokens) from usage_by_day) as tokens"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    version, n, tokens = proc.stdout.splitlines()[1].split(",")
    assert version.startswith("v1.") and (n, tokens) == ("2", "42")


def test_a_moved_output_still_answers_and_the_catalog_says_how_to_follow(capsys, out, tmp_path):
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(out, moved)
    code, stdout, err = invoke(capsys, "sql", str(moved), "select count(*) as n from inferences", "--format", "csv")
    assert (code, stdout) == (0, "n\n2\n")
    assert f"asr-batch catalog {moved}" in err
    with duckdb.connect(str(moved / "asr.duckdb"), read_only=True) as con:
        with pytest.raises(duckdb.IOException, match="No files found"):
            con.sql("select count(*) from inferences").fetchall()

    code, stdout, _ = invoke(capsys, "catalog", str(moved))
    assert code == 0 and "Rewrote" in stdout
    with duckdb.connect(str(moved / "asr.duckdb"), read_only=True) as con:
        assert con.sql("select count(*) from inference_costs").fetchall() == [(2,)]
    assert invoke(capsys, "sql", str(moved), "select 1")[2] == ""


PRICE_HEADER = ("model,effective_date,input_usd_per_mtok,output_usd_per_mtok,cache_write_5m_usd_per_mtok,"
                "cache_write_1h_usd_per_mtok,cache_read_usd_per_mtok,source,checked_on\n")


def test_catalog_prices_from_genai_prices_and_a_price_file(capsys, out, tmp_path):
    def cost() -> float:
        with duckdb.connect(str(out / "asr.duckdb"), read_only=True) as con:
            return round(con.sql("select sum(cost_usd) from inference_costs").fetchall()[0][0], 9)

    # two claude-opus-4-6 responses (6 uncached input, 50 cache read, 100 5m cache write tokens; 12 and
    # 30 output) at genai-prices 0.2.5's price: 5 input, 25 output, 6.25 5m write, 0.5 read per million
    # tokens: 6x5 + 50x0.5 + 100x6.25 = 680 each, plus (12 + 30)x25 = 1050
    assert cost() == 2410e-6
    prices = tmp_path / "prices.csv"
    prices.write_text(PRICE_HEADER + "claude-opus-4-6,2026-02-01,1,1,1,1,1,mine,2026-02-01\n")
    code, stdout, err = invoke(capsys, "catalog", str(out), "--prices", str(prices))
    assert (code, err) == (0, "") and "Rewrote" in stdout
    assert cost() == (2 * (6 + 50 + 100) + 12 + 30) * 1e-6
    # an option of the run that writes the catalog: without it, the list prices again
    assert invoke(capsys, "catalog", str(out))[0] == 0
    assert cost() == 2410e-6


def test_a_bad_price_file_is_one_error_line_and_leaves_the_catalog(capsys, out, tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text(PRICE_HEADER + "claude-opus-4-6,06/02/2026,1,1,1,1,1,mine,\n")
    before = (out / "asr.duckdb").read_bytes()
    code, _, err = invoke(capsys, "catalog", str(out), "--prices", str(prices))
    assert code == 1
    assert_one_error_line(err, f"{prices}:2: effective_date '06/02/2026' is not a date; write it as YYYY-MM-DD")
    assert (out / "asr.duckdb").read_bytes() == before


def test_catalog_refuses_a_folder_that_is_not_an_output(capsys, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"name": "my web extension"}')
    code, _, err = invoke(capsys, "catalog", str(folder))
    assert code == 1
    assert_one_error_line(err, "Pass a folder written by `asr-batch convert`")
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json"]


@pytest.mark.parametrize("args, fragment", [
    (("select 1", "--format", "xml"), "--format xml"),
    (("select 1", "--file", "q.sql"), "not both"),
    (("--file", "missing.sql"), "missing.sql: cannot be read"),
])
def test_usage_errors_are_one_line(capsys, out, args, fragment):
    code, _, err = invoke(capsys, "sql", str(out), *args)
    assert code == 1
    assert_one_error_line(err, fragment)


def test_sql_on_a_folder_without_manifest_is_one_error_line(capsys, tmp_path):
    folder = tmp_path / "not-an-output"
    folder.mkdir()
    code, stdout, err = invoke(capsys, "sql", str(folder), "select 1")
    assert (code, stdout) == (1, "")
    assert_one_error_line(err, "manifest.json")


def test_sql_on_an_output_missing_a_table_is_one_error_line(capsys, out):
    shutil.rmtree(out / "hooks")
    code, _, err = invoke(capsys, "sql", str(out), "select count(*) from hooks")
    assert code == 1
    assert_one_error_line(err, "No files found", "hooks")


def test_sql_runs_as_a_command(out):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "batch", "sql", str(out), "--format", "csv"],
        input="select count(*) as n from sessions", capture_output=True, text=True, env=env, check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "n\n1\n", "")


@pytest.mark.parametrize(("command", "expected"), [
    ("sql", ["--format", "csv", "json", "markdown", "--file", "--limit", "interactive"]),
    ("catalog", ["moving or copying", "out", "--prices", "data/pricing.csv", "genai-prices"]),
])
def test_commands_have_help(capsys, command, expected):
    code, stdout, err = invoke(capsys, command, "--help")
    assert (code, err) == (0, "")
    for word in expected:
        assert word in stdout.lower(), (word, stdout)


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "markdown"])
def test_an_error_while_running_is_one_line(capsys, out, fmt):
    code, _, err = invoke(capsys, "sql", str(out), "select range, error('late ' || range) from range(5000) where range > 4000",
                          "--format", fmt)
    assert code == 1
    assert_one_error_line(err, "late 4001")


def test_an_output_without_catalog_says_how_to_rebuild_it(capsys, out):
    (out / "asr.duckdb").unlink()
    code, _, err = invoke(capsys, "sql", str(out), "select 1")
    assert code == 1
    assert_one_error_line(err, f"asr-batch catalog {out}")
    assert invoke(capsys, "catalog", str(out))[0] == 0
    assert invoke(capsys, "sql", str(out), "select count(*) as n from inference_costs", "--format", "csv")[1] == "n\n2\n"
