"""`asr-batch report`: tokens and cost per local day, month, session and project (batch/report.py)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

import batch
from conftest import CWD, SID, TEXT, assistant, assert_one_error_line, invoke, uid, user, write_jsonl

OTHER = "0b9e4a0c-7d2f-4b6e-9a51-3c8f2d1e6a70"
# (session, response time in UTC, output tokens): the second response is 23:30 UTC, the next day in Tokyo
RESPONSES = [
    (SID, "2026-02-12T10:00:00.000Z", 12),
    (SID, "2026-02-12T23:30:00.000Z", 30),
    (OTHER, "2026-03-01T08:00:00.000Z", 7),
]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    for sid, project in ((SID, "-home-user-alpha"), (OTHER, "-home-user-beta")):
        lines = []
        for n, (owner, ts, output) in enumerate(RESPONSES):
            if owner == sid:
                lines += [user(uid(2 * n + 1), lines[-1]["uuid"] if lines else None, "go", sid=sid, ts=ts),
                          assistant(uid(2 * n + 2), uid(2 * n + 1), f"msg_0{n}", [TEXT], output=output,
                                    stop="end_turn", ts=ts, sid=sid, request_id=f"req_{n}")]
        write_jsonl(root / "projects" / project / f"{sid}.jsonl", lines)
    batch.convert([root / "projects"], root / "out")
    return root / "out"


def report(capsys, out: Path, *args: str) -> list[dict]:
    code, stdout, err = invoke(capsys, "report", str(out), *args, "--format", "json")
    assert code == 0, err
    return json.loads(stdout)


def test_daily_totals_equal_usage_by_day(capsys, out):
    code, stdout, _ = invoke(capsys, "sql", str(out), "select day, inferences, output_total_tokens, total_tokens, "
                             "cost_usd from usage_by_day order by day", "--format", "json")
    assert code == 0
    by_day = json.loads(stdout)
    daily = report(capsys, out, "daily", "--tz", "UTC")
    assert [(d["day"], d["inferences"], d["output_tokens"], d["total_tokens"]) for d in daily] == [
        (d["day"], d["inferences"], d["output_total_tokens"], d["total_tokens"]) for d in by_day]
    assert [d["cost_usd"] for d in daily] == pytest.approx([d["cost_usd"] for d in by_day], abs=1e-6)
    # and those are the days of the responses, with their output tokens
    expected: dict[str, int] = {}
    for _, ts, output in RESPONSES:
        expected[ts[:10]] = expected.get(ts[:10], 0) + output
    assert {d["day"]: d["output_tokens"] for d in daily} == expected


def test_a_time_zone_moves_a_response_across_a_day_boundary(capsys, out):
    tokyo = dt.timezone(dt.timedelta(hours=9))  # no daylight saving time
    expected: dict[str, int] = {}
    for _, ts, output in RESPONSES:
        day = dt.datetime.fromisoformat(ts).astimezone(tokyo).date().isoformat()
        expected[day] = expected.get(day, 0) + output
    assert {d["day"]: d["output_tokens"] for d in report(capsys, out, "daily", "--tz", "Asia/Tokyo")} == expected
    assert len(expected) == 3  # 10:00 and 23:30 UTC of one day are two days in Tokyo
    # the day views follow the same time zone
    code, stdout, _ = invoke(capsys, "sql", str(out), "select day, sum(output_total_tokens) as tokens from usage_by_day "
                             "group by day order by day", "--format", "json", "--tz", "Asia/Tokyo")
    assert {d["day"]: d["tokens"] for d in json.loads(stdout)} == expected


def test_monthly_session_and_project(capsys, out):
    assert [(m["month"], m["inferences"]) for m in report(capsys, out, "monthly", "--tz", "UTC")] == [
        ("2026-02", 2), ("2026-03", 1)]
    sessions = report(capsys, out, "session")
    assert {s["root_session_key"]: s["output_tokens"] for s in sessions} == {SID: 42, OTHER: 7}
    # both sessions' lines name one working directory (conftest's envelope): one project
    projects = report(capsys, out, "project")
    assert [(p["project"], p["inferences"]) for p in projects] == [(CWD, len(RESPONSES))]


def test_since_and_until_are_inclusive_local_days(capsys, out):
    assert [d["day"] for d in report(capsys, out, "daily", "--tz", "UTC", "--since", "2026-02-13")] == ["2026-03-01"]
    assert [d["day"] for d in report(capsys, out, "daily", "--tz", "UTC", "--until", "2026-02-12")] == ["2026-02-12"]
    sessions = report(capsys, out, "session", "--tz", "Asia/Tokyo", "--since", "2026-02-13", "--until", "2026-02-13")
    assert [(s["root_session_key"], s["output_tokens"]) for s in sessions] == [(SID, 30)]


@pytest.mark.parametrize(("args", "fragment"), [
    (["daily", "--tz", "Mars/Olympus"], "not a time zone"),
    (["weekly"], "weekly: not a report"),
    (["daily", "--since", "2026-03-01", "--until", "2026-02-01"], "is after --until"),
    (["daily", "--format", "xml"], "--format xml"),
])
def test_errors_are_one_line(capsys, out, args, fragment):
    code, _, err = invoke(capsys, "report", str(out), *args)
    assert code == 1
    assert_one_error_line(err, fragment)
