"""Entire's v2 checkpoint refs (reference entire.md §9): a repository built by tests/entire_repos.py
`build_v2` with v1 and v2 side by side, converted; expected values read from the bytes the builder
wrote (V2_RAW) and from the refs with `git`, not from our reader."""

from __future__ import annotations

import shutil

import duckdb
import pytest

import batch
from entire_repos import (
    SA, SB, SC, SD, SE, V2_CURRENT, V2_DUAL, V2_MAIN, V2_ONLY, V2_ORPHAN, V2_RAW, V2_SEALED, V2_TWICE, build_v2, git,
)

TABLES = ("sessions", "source_lines", "losses", "checkpoints", "checkpoint_sessions", "checkpoint_commits",
          "vcs_events", "parts")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    work = build_v2(tmp_path_factory.mktemp("v2"))
    out = tmp_path_factory.mktemp("out") / "out"
    batch.convert([work], out)
    return work, out


def sql(out, query: str) -> list[tuple]:
    with duckdb.connect() as con:
        for name in TABLES:
            con.execute(f"create view {name} as select * from read_parquet('{out}/{name}/*.parquet')")
        return con.sql(query).fetchall()


def lines(data: bytes) -> int:
    return sum(1 for line in data.split(b"\n") if line.strip())


def test_the_v2_refs_are_what_the_builder_wrote(converted):
    work, _ = converted
    refs = git(work, "for-each-ref", "--format=%(refname)", "refs/entire/checkpoints/v2").splitlines()
    assert sorted(refs) == sorted([V2_MAIN, V2_CURRENT, V2_SEALED])


def test_each_checkpoint_says_which_layout_it_came_from(converted):
    _, out = converted
    rows = sql(out, "select checkpoint_id, layout, ref, session_count, shadowed_refs from checkpoints order by 1")
    assert rows == [
        (V2_DUAL, "v1+v2", "refs/heads/entire/checkpoints/v1", 2, []),
        (V2_ONLY, "v2", V2_MAIN, 2, []),  # the folder repeating SC's ID is not read
        (V2_TWICE, "v2", V2_MAIN, 1, []),
    ]
    sessions = sql(out, "select checkpoint_id, session_folder, session_id, layout from checkpoint_sessions order by 1, 2")
    assert sessions == [
        (V2_DUAL, "0", SA, "v1"), (V2_DUAL, "1", SB, "v2"),
        (V2_ONLY, "0", SC, "v2"), (V2_ONLY, "1", SD, "v2"),
        (V2_TWICE, "0", SE, "v2"),
    ]


def test_every_session_of_both_layouts_is_converted_once(converted):
    _, out = converted
    counts = dict(sql(out, "select session_key, count(*) from source_lines group by 1"))
    assert set(counts) == {SA, SB, SC, SD, SE}  # SD: its compact transcript (the next test)
    assert {key: counts[key] for key in (SA, SB, SC, SE)} == {
        SA: lines(V2_RAW["dual_v1"]),  # v1 taken for a session in both layouts
        SB: lines(V2_RAW["only_in_v2"]),
        SC: lines(V2_RAW["chunked"]),  # the two chunks of the sealed generation joined
        SE: lines(V2_RAW["current"]),  # /full/current before the sealed generation
    }
    texts = {r[0] for r in sql(out, f"select text from parts where session_key = '{SA}' and text is not null")}
    assert texts == {"v1 one", "v1 two"}
    texts = {r[0] for r in sql(out, f"select text from parts where session_key = '{SE}' and text is not null")}
    assert texts == {"e new one", "e new two"}


def test_a_session_without_raw_transcript_keeps_its_row_from_the_compact_transcript(converted):
    work, out = converted
    etf = git(work, "show", f"{V2_MAIN}:bb/00000000b2/1/transcript.jsonl").encode() + b"\n"
    ((source, records),) = sql(out, f"select producer_source, record_count from sessions where session_key = '{SD}'")
    assert source == "entire-transcript"
    assert sql(out, f"select count(*) from source_lines where session_key = '{SD}'") == [(lines(etf),)]
    assert records > 0  # how many records the ETF lines make is the ETF reader's rule (tests/unit/test_entire_transcript.py)


def test_v2_facts_that_cannot_be_read_are_declared_losses(converted):
    _, out = converted
    rows = sql(out, "select category, session_key, detail from losses where category similar to 'entire.v[12]_.*'")
    got = sorted((category, key) for category, key, _ in rows)
    assert got == sorted([
        ("entire.v1_v2_divergent", SA),  # v1 and v2 raw hashes differ (not Codex)
        ("entire.v2_raw_hash_missing", SB),
        ("entire.v2_missing_raw_transcript", SD),
        ("entire.v2_raw_hash_mismatch", SE),
        ("entire.v2_duplicate_session_id", None),  # folder 2 of V2_ONLY: not read, so no session
        ("entire.v2_raw_without_main", None),  # V2_ORPHAN: no checkpoint, no session
    ])
    details = {category: detail for category, _, detail in rows}
    assert V2_ORPHAN in details["entire.v2_raw_without_main"] and "2" in details["entire.v2_duplicate_session_id"]


def test_a_compact_start_written_from_0_5_5_is_a_compact_transcript_start(converted):
    _, out = converted
    assert sql(out, f"select checkpoint_transcript_start, compact_transcript_start from checkpoint_sessions "
                    f"where session_id = '{SC}'") == [(None, 3)]


def test_a_trailer_naming_a_v2_only_checkpoint_is_resolved(converted):
    _, out = converted
    assert sql(out, "select checkpoint_id, is_checkpoint_present from checkpoint_commits") == [(V2_ONLY, True)]
    assert sql(out, "select count(*) from losses where category = 'entire.absent_checkpoint'") == [(0,)]


def test_a_rerun_reuses_every_v2_session(converted, tmp_path):
    work, first = converted
    out = tmp_path / "out"
    shutil.copytree(first, out)
    result = batch.convert([work], out)
    assert result.manifest["reuse"]["session_groups_converted"] == 0
    assert sql(out, "select session_key, record_count from sessions order by 1") == \
        sql(first, "select session_key, record_count from sessions order by 1")


def test_all_checkpoints_read_v2_alike(converted, tmp_path):
    work, first = converted
    out = tmp_path / "out"
    batch.convert([work], out, all_checkpoints=True)
    query = "select session_key, count(*) from source_lines group by 1 order by 1"
    assert sql(out, query) == sql(first, query)


def test_sessions_of_deleted_v2_refs_are_kept(tmp_path):
    work, out = build_v2(tmp_path / "repo"), tmp_path / "out"
    batch.convert([work], out)
    for ref in (V2_MAIN, V2_CURRENT, V2_SEALED):
        git(work, "update-ref", "-d", ref)
    batch.convert([work], out)
    rows = dict(sql(out, "select session_key, source_present from sessions"))
    assert rows == {SA: True, SB: False, SC: False, SD: False, SE: False}
