"""The `-- reads:` headers of sql/ and the order derived from them (batch/sql.py)."""

from __future__ import annotations

import json
import threading

import duckdb
import pytest
from conftest import SID, TEXT, assistant, uid, user, write_jsonl

import batch
from batch import sql
from batch.formats.claude_code import converter
from batch.errors import SqlError
from batch.schema import TABLES
from batch.schema.work import WORK_SCHEMAS


def _read_names(node, scope: frozenset[str], found: set[str]) -> None:
    """Collect the table names a parsed statement reads, leaving out the names of its CTEs where they are in scope."""
    if isinstance(node, list):
        for item in node:
            _read_names(item, scope, found)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "BASE_TABLE" and node["table_name"] not in scope:
        found.add(node["table_name"])
    ctes = (node.get("cte_map") or {}).get("map") if isinstance(node.get("cte_map"), dict) else None
    if ctes:
        inner = set(scope)
        for cte in ctes:
            # a CTE sees the CTEs before it, and itself only when recursive: `with x as (select * from x)`
            # reads the table x
            recursive = cte["value"]["query_node"]["type"] == "RECURSIVE_CTE_NODE"
            _read_names(cte["value"], frozenset(inner | {cte["key"]} if recursive else inner), found)
            inner.add(cte["key"])
        _read_names({k: v for k, v in node.items() if k != "cte_map"}, frozenset(inner), found)
        return
    for value in node.values():
        _read_names(value, scope, found)


def parsed_reads(text: str) -> set[str]:
    """The relations a SQL text reads, from DuckDB's own parse tree."""
    tree = json.loads(duckdb.sql("select json_serialize_sql($q)", params={"q": text}).fetchall()[0][0])
    assert not tree["error"], tree
    found: set[str] = set()
    _read_names(tree["statements"], frozenset(), found)
    return found


def test_the_parser_tells_ctes_from_tables():
    text = (
        "with recursive walk as (select * from nodes union select n.* from nodes n join walk using (id)),\n"
        "compactions as (select * from compactions)\n"
        "select * from walk join compactions using (id) where id in (select id from kept)"
    )
    assert parsed_reads(text) == {"nodes", "compactions", "kept"}


@pytest.mark.parametrize("name", sql.names())
def test_each_header_names_exactly_what_the_file_reads(name):
    assert set(sql.reads(name)) == parsed_reads(sql.load(name)), f"sql/{name}.sql: fix its `-- reads:` header"


@pytest.mark.parametrize("name", sql.names())
def test_each_header_lists_its_reads_once_and_sorted(name):
    reads = list(sql.reads(name))
    assert reads == sorted(set(reads))


def test_the_final_stage_order_follows_the_headers():
    given = {t.name for t in TABLES if t.stage == "batch"} | set(WORK_SCHEMAS)
    steps = sql.order(["losses", "sessions", "inferences"], given=given)
    assert set(steps) == {
        "inference_ranks", "inference_rows", "inference_observations", "inferences", "lineage", "sessions", "losses",
    }
    for i, step in enumerate(steps):
        assert set(sql.reads(step)) <= given | set(steps[:i]), step


def test_order_puts_each_relation_after_what_it_reads():
    reads = {"c": ["b", "a"], "b": ["a", "x"], "a": ["x"], "unused": ["x"]}
    assert sql.topological(["c"], reads, given={"x"}) == ["a", "b", "c"]


def test_a_given_relation_is_not_built_again():
    assert sql.topological(["c"], {"c": ["b"], "b": ["a"]}, given={"b"}) == ["c"]


def test_a_cycle_is_an_error_naming_the_file():
    reads = {"a": ["b"], "b": ["c"], "c": ["a"]}
    with pytest.raises(SqlError, match=r"sql/a\.sql reads itself through a -> b -> c -> a"):
        sql.topological(["a"], reads)


def test_an_unknown_name_is_an_error_naming_the_file():
    with pytest.raises(SqlError, match=r"sql/b\.sql reads `nowhere`, which is neither a file of sql/ nor registered"):
        sql.topological(["a"], {"a": ["b"], "b": ["nowhere"]})


def test_a_file_without_header_is_an_error_naming_it(monkeypatch):
    monkeypatch.setattr(sql, "load", lambda name: "-- plain: one row\nselect 1\n")
    sql.reads.cache_clear()
    try:
        with pytest.raises(SqlError, match=r"sql/batch/records/parts\.sql has no `-- reads:` header"):
            sql.reads("parts")
    finally:
        sql.reads.cache_clear()


def test_defined_lists_registered_frames_and_temporary_relations():
    con = duckdb.connect()
    con.register("frame", duckdb.sql("select 1 as x").arrow())
    con.execute("create temp table t as select 1 as x")
    con.execute("create temp view v as select 1 as x")
    assert {"frame", "t", "v"} <= sql.defined(con)


@pytest.mark.parametrize(
    ("json", "expected"),
    [
        ("42", 42),
        ("-7", -7),
        ("0", 0),
        ("9223372036854775807", 2**63 - 1),  # the largest BIGINT (json_type UBIGINT)
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775808", None),  # 2^63: a UBIGINT that no BIGINT holds
        ("18446744073709551615", None),  # 2^64 - 1, the largest UBIGINT
        ("18446744073709551616", None),  # 2^64: json_type DOUBLE
        ("1e30", None),
        ("1.0", None),  # a double with an integral value
        ("1.5", None),
        ('"1"', None),  # a string of digits
        ("true", None),
        ("[1]", None),
        ('{"a": 1}', None),
        ("null", None),  # JSON null
    ],
)
def test_json_bigint_maps_json_integers_that_fit_and_nothing_else(json, expected):
    con = duckdb.connect()
    sql.define_macros(con)
    value = f'{{"v": {json}}}'
    got = con.execute("select json_bigint($j::json -> '$.v'), json_bigint(($j::json -> '$.v')::varchar)", {"j": value}).fetchall()
    assert got == [(expected, expected)]


def test_json_bigint_of_an_absent_field_or_sql_null_is_null():
    con = duckdb.connect()
    sql.define_macros(con)
    assert con.execute("select json_bigint('{}'::json -> '$.v'), json_bigint(null::json)").fetchall() == [(None, None)]


def test_json_bigint_works_inside_a_lambda_and_an_aggregate():
    con = duckdb.connect()
    sql.define_macros(con)
    got = con.execute(
        "select list_transform(['1', '2.0', '\"3\"', '4']::json[], lambda v: json_bigint(v)), "
        "sum(json_bigint(j)) from (select unnest(['5', '6', '7.0']::json[]) as j)"
    ).fetchall()
    assert got == [([1, None, None, 4], 11)]


@pytest.mark.parametrize("name", sql.names())
def test_the_json_integer_rule_is_spelled_once(name):
    # every file takes a JSON integer with json_bigint (sql/macros/json_bigint.sql), not a copy of its body
    text = " ".join(sql.load(name).split())
    assert "in ('BIGINT', 'UBIGINT') then try_cast(" not in text
    assert "in ('UBIGINT', 'BIGINT') then try_cast(" not in text


def test_the_statements_with_large_results_are_declared_in_their_headers():
    assert {name for name in sql.names() if sql.large(name)} == {
        "codex_lines", "observations", "parts", "records_full", "tool_calls"}


def test_records_full_alone_holds_the_large_statements_until_the_release():
    assert {name for name in sql.names() if sql.held(name)} == {"records_full"}


def _free_elsewhere() -> bool:
    """Whether another thread can take the lock of the large statements now (and gives it back)."""
    result = []

    def probe() -> None:
        took = sql._ONE_LARGE.acquire(blocking=False)
        if took:
            sql._ONE_LARGE.release()
        result.append(took)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return result[0]


def test_a_hold_keeps_the_large_statements_of_other_threads_until_the_release(monkeypatch):
    texts = {"held": "-- reads:\n-- result: large\n-- hold: until release\nselect 1 as x\n", "plain": "-- reads:\nselect 2 as x\n"}
    monkeypatch.setattr(sql, "load", lambda name: texts[name])
    for cached in (sql.large, sql.held, sql.sorted_by):
        cached.cache_clear()
    con = duckdb.connect()
    try:
        assert sql.frame(con, "held").item() == 1 and _free_elsewhere()  # outside `holds`: no hold
        with sql.holds():
            assert sql.frame(con, "plain").item() == 2 and _free_elsewhere()  # no hold
            assert sql.frame(con, "held").item() == 1
            assert not _free_elsewhere()
            assert sql.frame(con, "held").item() == 1 and sql.frame(con, "plain").item() == 2  # the holder runs on
            assert not _free_elsewhere()
            sql.release(con)
            assert _free_elsewhere()
            sql.materialize(con, "held")  # a temporary table holds too
            assert not _free_elsewhere()
        assert _free_elsewhere()  # the end of `holds` ends it
    finally:
        for cached in (sql.large, sql.held, sql.sorted_by):
            cached.cache_clear()


def test_a_batch_that_fails_after_its_hold_lets_the_others_run(monkeypatch, tmp_path):
    # the hold starts at records_full; the batch fails after it, before its release
    folder = tmp_path / "projects" / "-home-user-project"
    write_jsonl(folder / f"{SID}.jsonl", [user(uid(1), None, "hello"), assistant(uid(2), uid(1), "msg_1", [TEXT])])

    def failing(*args, **kwargs):
        assert not _free_elsewhere()  # held here
        raise ZeroDivisionError

    monkeypatch.setattr(converter, "_tool_calls", failing)
    with pytest.raises(ZeroDivisionError):
        batch.convert([folder], tmp_path / "out")
    # taken by this thread, alive throughout (a new thread can have the ident of the batch's, ended)
    assert sql._ONE_LARGE.acquire(blocking=False)
    sql._ONE_LARGE.release()


def test_a_large_result_is_the_same_frame_as_a_direct_execution(monkeypatch):
    # a large result is fetched through a relation, the others by executing the statement: same rows, order, types
    text = "-- reads: t\n{}select x, s, x % 3 = 0 as b from t order by x desc\n"
    con = duckdb.connect()
    con.execute("create temp table t as select range as x, repeat('a', (range % 7)::int) as s from range(5000)")
    frames = {}
    for header in ("", "-- result: large\n"):
        monkeypatch.setattr(sql, "load", lambda name, header=header: text.format(header))
        sql.large.cache_clear()
        try:
            assert sql.large("q") == bool(header)
            frames[header] = sql.frame(con, "q")
        finally:
            sql.large.cache_clear()
    assert frames[""].height == 5000
    assert frames[""].equals(frames["-- result: large\n"])
    assert frames[""].schema == frames["-- result: large\n"].schema


def test_a_declared_order_is_the_order_of_every_way_to_run_a_file(monkeypatch):
    # `-- order:` instead of ORDER BY: frame sorts in Polars, relation, materialize and view in DuckDB;
    # ascending with nulls last, strings by their bytes, as DuckDB's ORDER BY
    text = (
        "-- reads: t\n-- result: large\n-- order: k, j\n"
        "select k, j, repeat('x', j % 5) as s from t\n"
    )
    con = duckdb.connect()
    con.execute(
        "create temp table t as select case when range % 11 = 0 then null "
        "else ['b', 'a', 'B', 'é', 'ab', ''][range % 6 + 1] end as k, (range * 7919) % 1000 as j from range(1000)"
    )
    monkeypatch.setattr(sql, "load", lambda name: text)
    for cached in (sql.large, sql.sorted_by):
        cached.cache_clear()
    try:
        assert sql.sorted_by("q") == ("k", "j")
        framed = sql.frame(con, "q")
        related = sql.relation(con, "q").pl()
        sql.materialize(con, "q")
        materialized = con.table("q").pl()
    finally:
        for cached in (sql.large, sql.sorted_by):
            cached.cache_clear()
    expected = con.sql("select k, j, repeat('x', j % 5) as s from t order by k, j").pl()
    assert framed.height == 1000
    assert framed.get_column("k").null_count() > 0 and framed.get_column("k").is_null().tail(1).item()
    assert framed.equals(expected)
    assert related.equals(expected)
    assert materialized.equals(expected)


def test_only_the_envelope_decode_runs_beside_the_other_large_statements():
    assert {name for name in sql.names() if sql.concurrent(name)} == {"observations"}


def test_a_concurrent_large_statement_runs_while_another_thread_holds(monkeypatch):
    texts = {
        "held": "-- reads:\n-- result: large\n-- hold: until release\nselect 1 as x\n",
        "decode": "-- reads:\n-- result: large, concurrent\nselect 3 as x\n",
        "large": "-- reads:\n-- result: large\nselect 4 as x\n",
    }
    monkeypatch.setattr(sql, "load", lambda name: texts[name])
    for cached in (sql.large, sql.concurrent, sql.held, sql.sorted_by):
        cached.cache_clear()
    held, results = threading.Event(), {}

    def holder() -> None:
        con = duckdb.connect()
        with sql.holds():
            sql.frame(con, "held")
            held.set()
            release.wait(timeout=60)  # the other thread's statements run meanwhile
            sql.release(con)

    def other(name: str) -> None:
        results[name] = sql.frame(duckdb.connect(), name).item()

    release = threading.Event()
    try:
        assert sql.large("decode") and sql.concurrent("decode") and not sql.concurrent("large")
        thread = threading.Thread(target=holder)
        thread.start()
        assert held.wait(timeout=60)
        decode, large = threading.Thread(target=other, args=("decode",)), threading.Thread(target=other, args=("large",))
        decode.start()
        large.start()
        decode.join(timeout=60)
        large.join(timeout=1)  # a lock that let it through would let it finish by now
        assert results == {"decode": 3}  # the decode ran during the hold, the other large statement waits
        release.set()
        thread.join(timeout=60)
        large.join(timeout=60)
        assert results == {"decode": 3, "large": 4}
    finally:
        release.set()
        for cached in (sql.large, sql.concurrent, sql.held, sql.sorted_by):
            cached.cache_clear()
