"""Entire's v2 checkpoint refs (reference entire.md §9): a repository built by tests/entire_repos.py
`build_v2` with v1 and v2 side by side, converted; expected values read from the bytes the builder
wrote (V2_RAW) and from the refs with `git`, not from our reader."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest

import batch
from batch.sources.entire.model import Checkpoint, CheckpointLocation, SessionEntry
from batch.sources.entire.scan_v2 import reaggregate
from entire_repos import (
    SA, SB, SC, SD, SE, V2_CURRENT, V2_DUAL, V2_DUAL_ATTRIBUTION, V2_DUAL_SESSIONS, V2_MAIN, V2_ONLY, V2_ORPHAN,
    V2_RAW, V2_SEALED, V2_TWICE, build_v2, git,
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
        ("entire.v1_v2_root_recomputed", None),  # V2_DUAL: v1's summary does not count SB (the next test)
    ])
    details = {category: detail for category, _, detail in rows}
    assert V2_ORPHAN in details["entire.v2_raw_without_main"] and "2" in details["entire.v2_duplicate_session_id"]


def test_the_root_row_of_a_checkpoint_in_both_layouts_aggregates_the_union_of_its_sessions(converted):
    """§9.6 rule 5. Expected values are summed here from the session metadata the builder wrote; v1's
    summary (SA alone) is read back with `git`."""
    work, out = converted
    written = [V2_DUAL_SESSIONS[SA], V2_DUAL_SESSIONS[SB]]
    tokens = ("input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens", "api_call_count")
    ((count, files, usage, attribution, stored, sessions),) = sql(
        out, "select checkpoints_count, files_touched, token_usage, combined_attribution, metadata, session_count "
             f"from checkpoints where checkpoint_id = '{V2_DUAL}'")
    assert count == sum(s["checkpoints_count"] for s in written) == 5
    assert files == sorted({f for s in written for f in s["files_touched"]}) == ["src/a.py", "src/b.py", "src/shared.py"]
    assert json.loads(usage) == {k: sum(s["token_usage"][k] for s in written) for k in tokens}
    assert json.loads(attribution) == V2_DUAL_ATTRIBUTION  # v1's summary has none, every v2 session is readable
    assert sessions == len(written)
    # v1's summary is kept as stored, its own aggregates included
    v1 = json.loads(git(work, "show", "refs/heads/entire/checkpoints/v1:aa/00000000a1/metadata.json"))
    assert json.loads(stored) == v1
    assert (v1["checkpoints_count"], v1["token_usage"]) == (2, V2_DUAL_SESSIONS[SA]["token_usage"])
    assert "combined_attribution" not in v1 and "has_review" not in v1
    ((detail,),) = sql(out, "select detail from losses where category = 'entire.v1_v2_root_recomputed'")
    files = '["src/a.py", "src/shared.py"] -> ["src/a.py", "src/b.py", "src/shared.py"]'
    for said in (V2_DUAL, "checkpoints_count 2 -> 5", files, "has_review null -> true", "combined_attribution null -> {"):
        assert said in detail


def test_a_v2_only_checkpoint_keeps_its_v2_summary(converted):
    _, out = converted
    rows = sql(out, "select checkpoint_id, checkpoints_count, files_touched, token_usage from checkpoints "
                    "where layout = 'v2' order by 1")
    assert rows == [(V2_ONLY, 1, None, None), (V2_TWICE, 1, None, None)]  # v2's summaries as stored


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


def test_a_summary_already_counting_the_union_is_no_loss_and_attribution_waits_for_readable_sessions():
    """reaggregate on checkpoints made here: v1's summary already the union's sums, and a v2 session unreadable."""
    where = CheckpointLocation("repo", "refs/heads/entire/checkpoints/v1", "0" * 40, "aa/00000000a1")
    written = [V2_DUAL_SESSIONS[SA], V2_DUAL_SESSIONS[SB]]
    sessions = [SessionEntry(V2_DUAL, where, str(i), f"aa/00000000a1/{i}", metadata=m) for i, m in enumerate(written)]
    union = {"checkpoints_count": sum(m["checkpoints_count"] for m in written),
             "files_touched": sorted({f for m in written for f in m["files_touched"]}), "has_review": True,
             "token_usage": {k: sum(m["token_usage"][k] for m in written) for k in written[0]["token_usage"]}}
    checkpoint = Checkpoint(V2_DUAL, where, union, list(sessions))
    reaggregate(checkpoint, {"combined_attribution": V2_DUAL_ATTRIBUTION}, unreadable=True)
    assert checkpoint.losses == []
    assert {k: checkpoint.recomputed[k] for k in union} == union
    assert checkpoint.recomputed["combined_attribution"] is None  # v1 has none; v2's withheld
