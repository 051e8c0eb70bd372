"""Checkpoint metadata as the proposed `checkpoints`, `checkpoint_sessions` and `checkpoint_commits` frames.

Expected values are read by hand from the corpus metadata files (tests/fixtures/entire)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from batch.formats.entire_metadata import (
    checkpoint_commits_frame,
    checkpoint_sessions_frame,
    checkpoints_frame,
    source_losses_frame,
)
from batch.schema.core import LOSSES
from batch.schema.entire import CHECKPOINT_COMMITS, CHECKPOINT_SESSIONS, CHECKPOINTS
from batch.sources.entire import SourceLoss, scan_checkpoints, scan_trailers, select_sessions
from batch.sources.git import open_repository
from entire_repos import S1, build_scenario


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return open_repository(build_scenario(tmp_path_factory.mktemp("entire-meta"))["work"])


@pytest.fixture(scope="module")
def scan(repo):
    return scan_checkpoints(repo)


def rows_by(frame, *keys):
    return {tuple(r[k] for k in keys): r for r in frame.iter_rows(named=True)}


def test_checkpoint_sessions(scan):
    frame = checkpoint_sessions_frame(scan, select_sessions(scan))
    assert frame.columns == CHECKPOINT_SESSIONS.names
    assert frame.height == 10  # every folder of every checkpoint, selected or not
    rows = rows_by(frame, "checkpoint_id", "session_folder")
    codex = rows[("bbef1c2a76a9", "0")]
    assert {k: codex[k] for k in ("agent", "model", "turn_id", "created_at", "is_selected")} == {
        "agent": "Codex", "model": "gpt-5.6-sol", "turn_id": "76b3d5d2aaa6",
        "created_at": datetime(2026, 7, 24, 4, 45, 0, 295721, tzinfo=UTC), "is_selected": True,
    }
    assert (codex["input_tokens"], codex["cache_creation_tokens"], codex["cache_read_tokens"],
            codex["output_tokens"], codex["api_call_count"], codex["thinking_tokens"]) == (151434, 0, 1619712, 17208, 28, None)
    assert (codex["agent_lines"], codex["total_committed"], codex["agent_percentage"],
            codex["attribution_metric_version"]) == (157, 157, 100.0, 2)
    assert (codex["compact_transcript_start"], codex["checkpoint_transcript_start"]) == (0, None)
    assert codex["compact_transcript_path"] == "bb/ef1c2a76a9/0/transcript.jsonl"
    assert json.loads(codex["metadata"])["session_id"] == "019f9261-846e-7fc0-b843-e0464227f290"
    legacy = rows[("4c02af2759b6", "0")]
    assert (legacy["session_id"], legacy["session_key"], legacy["is_selected"]) == (f"2026-01-13-{S1}", S1, False)
    assert legacy["created_at"] == datetime(2026, 1, 13, 0, 32, 55, 492075, tzinfo=UTC)  # +11:00 in the file
    assert (legacy["agent"], legacy["files_touched"], legacy["input_tokens"], legacy["task_count"]) == (None, None, None, 1)
    newer = rows[("c0ffee000001", "0")]
    assert (newer["is_selected"], newer["checkpoint_transcript_start"], newer["transcript_chunks"]) == (True, 6, 2)
    broken = rows[("f0f0f0f0f0f0", "0")]
    assert (broken["session_key"], broken["metadata"]) == ("f0f0f0f0f0f0/0", None)
    cli056 = rows[("b5a37dc3d0fe", "0")]
    assert (cli056["checkpoint_transcript_start"], cli056["agent_percentage"]) == (278, 73.33333333333333)


def test_checkpoints(scan):
    frame = checkpoints_frame(scan)
    assert frame.columns == CHECKPOINTS.names
    rows = rows_by(frame, "checkpoint_id")
    b5 = rows[("b5a37dc3d0fe",)]
    assert (b5["ref"], b5["tree_path"], b5["shadowed_refs"]) == (
        "refs/entire/checkpoints/fe/b5a37dc3d0fe", "", ["refs/heads/entire/checkpoints/v1"],
    )
    assert (b5["cli_version"], b5["branch"], b5["checkpoints_count"], b5["session_count"]) == (
        "0.5.6", "compact-transcript-pi", 2, 1,
    )
    assert json.loads(b5["combined_attribution"])["agent_lines"] == 8
    assert json.loads(b5["token_usage"])["cache_read_tokens"] == 1182428
    assert rows[("01M228EVE8JJQ9J34JESFQX7BH",)]["files_touched"] == [
        "cmd/entire/cli/remote_topology.go", "cmd/entire/cli/remote_topology_test.go",
    ]


def test_checkpoint_commits(repo, scan):
    frame = checkpoint_commits_frame(scan_trailers(repo), scan)
    assert frame.columns == CHECKPOINT_COMMITS.names
    present = dict(frame.select("checkpoint_id", "is_checkpoint_present").iter_rows())
    assert present == {"4c02af2759b6": True, "c0ffee000001": True, "01M228EVE8JJQ9J34JESFQX7BH": True,
                       "0123456789ab": False}


def test_source_losses_name_checkpoint_session_and_path():
    frame = source_losses_frame([
        ("s", SourceLoss("missing_blob", "blob 1234 is absent", "e0e0e0e0e0e0", "0", "e0/e0e0e0e0e0/0/full.jsonl")),
        (None, SourceLoss("unknown_file", "x is not documented", "c0ffee000001", None, "c0/ffee000001/x")),
    ])
    assert frame.columns == LOSSES.names
    assert frame.rows() == [
        ("s", "entire.missing_blob", "checkpoint e0e0e0e0e0e0, session folder 0, e0/e0e0e0e0e0/0/full.jsonl: "
         "blob 1234 is absent", 1),
        (None, "entire.unknown_file", "checkpoint c0ffee000001, c0/ffee000001/x: x is not documented", 1),
    ]
