"""A person's rejection that a tool result records only in its text is a denial, not a tool error.

Before results carried permissionDecision and toolDenialKind (none of the real transcripts up to
2.1.199 has one), Claude Code wrote a rejection, a cancellation or an interruption as the text of an
error result (sql/macros/denial_marker.sql, docs/asr-tables.md "Tools and lineage"). Expected values
are read from the real corpus (tests/fixtures/corpus) with json.loads and the texts written out
below, copied from its lines; the authored scenarios of tests/fixtures/registry/denials hold what
the corpus lacks: outputs that quote the texts, and an interruption written as a result.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import duckdb
import polars as pl
import pytest

import batch
from conftest import CORPUS, FIXTURES, one, read_tables, rows

REGISTRY = FIXTURES / "registry" / "denials"
QUOTED = "d0000000-0000-4000-8000-000000000001"
INTERRUPTED = "d0000000-0000-4000-8000-000000000002"

REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
            "edit, the new_string was NOT written to the file). ")
STOP = "STOP what you are doing and wait for the user to tell you how to proceed."
# variant -> (the start of the result's text, status, denial_kind, permission, decided_by, whether the rest
# of the text is the user's reason)
MARKERS = {
    "rejected": (REJECTED + STOP, "denied", "user-rejected", "reject_once", "user", False),
    "rejected, the user said": (
        REJECTED + "To tell you how to proceed, the user said:\n", "denied", "user-rejected", "reject_once", "user", True,
    ),
    "rejected, the reason": (
        REJECTED + "The user provided the following reason for the rejection: ",
        "denied", "user-rejected", "reject_once", "user", True,
    ),
    "cancelled": (
        "The user doesn't want to take this action right now. " + STOP, "cancelled", "cancelled", "reject_once", "user",
        False,
    ),
    "interrupted": ("[Request interrupted by user for tool use]", "interrupted", "interrupted", None, None, False),
}
MAPPED = ["call_id", "tool_name", "status", "denial_kind", "permission", "permission_decided_by",
          "permission_evidence", "denial_reason"]
KIND_BY_NAME = {
    "Bash": "execute", "PowerShell": "execute", "Edit": "edit", "Write": "edit", "NotebookEdit": "edit",
    "Read": "read", "Glob": "search", "Grep": "search", "ToolSearch": "search", "WebFetch": "fetch",
    "WebSearch": "fetch",
}


def blocks(obj: dict) -> list[dict]:
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    return content or ""


def objects(path: Path) -> list[dict]:
    """The JSON objects of a file's lines (lines that are not one object left out)."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def marked_results(folder: Path) -> list[dict]:
    """Every error tool_result of the files below `folder` whose text starts with a marker, with its
    call's tool name, the line's version and what the mapping should give."""
    found = []
    for path in sorted(folder.rglob("*.jsonl")):
        names = {}
        for obj in objects(path):
            for block in blocks(obj):
                if block.get("type") == "tool_use":
                    names[block["id"]] = block["name"]
                if block.get("type") != "tool_result" or block.get("is_error") is not True:
                    continue
                text = result_text(block)
                for variant, (marker, status, kind, permission, decided_by, has_reason) in MARKERS.items():
                    if text.startswith(marker):
                        found.append(dict(
                            call_id=block["tool_use_id"], tool_name=names[block["tool_use_id"]], variant=variant,
                            version=obj.get("version"), status=status, denial_kind=kind, permission=permission,
                            permission_decided_by=decided_by, permission_evidence="text_marker",
                            denial_reason=text[len(marker):] if has_reason else None,
                        ))
    return found


@pytest.fixture(scope="module")
def expected() -> list[dict]:
    return marked_results(CORPUS)


@pytest.fixture(scope="module")
def authored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pl.DataFrame]:
    out = tmp_path_factory.mktemp("registry-denials") / "out"
    batch.convert([REGISTRY], out)
    return read_tables(out)


def test_real_denial_texts_by_variant_and_version(expected):
    # counted by hand in the corpus files (grep of "The user doesn't want to"), which hold no other
    # variant of these texts as a result
    assert Counter((m["variant"], m["version"]) for m in expected) == {
        ("rejected", "1.0.17"): 1, ("rejected", "2.0.42"): 1, ("rejected", "2.1.38"): 2, ("rejected", "2.1.39"): 1,
        ("rejected", "2.1.185"): 1,  # with a note appended after it
        ("rejected, the user said", "2.1.179"): 2,
        ("rejected, the reason", "2.0.42"): 1,
        ("cancelled", "1.0.17"): 1, ("cancelled", "2.0.42"): 2,
    }


def test_every_real_denial_text_is_a_denial_by_the_user(corpus_tables, expected):
    calls = corpus_tables["tool_calls"]
    want = sorted(tuple(m[c] for c in MAPPED) for m in expected)
    got = sorted(calls.filter(pl.col("permission_evidence") == "text_marker").select(MAPPED).rows())
    assert got == want
    # the reason as the 2.0.42 line has it after the marker, its leading space included
    assert " use pnpm" in {reason for *_, reason in got}


def test_real_denials_are_approvals_and_no_tool_errors(corpus_out, corpus_tables, expected):
    with duckdb.connect(str(corpus_out / "asr.duckdb"), read_only=True) as con:
        approvals = con.sql("select * from approvals").pl()
        rates = con.sql("select * from tool_rates").pl()
    marked = [m for m in expected if m["permission"] is not None]
    assert one(approvals, decided_by="user", decision="reject_once", evidence="text_marker") == dict(
        decided_by="user", decision="reject_once", evidence="text_marker", calls=len(marked),
        tools=len({m["tool_name"] for m in marked}), denied_calls=sum(m["status"] == "denied" for m in marked),
        share=len(marked) / approvals["calls"].sum(),
    )
    # every error result is an error, a denial or an interruption, and a denial is never an error
    errors = Counter(KIND_BY_NAME.get(n, "other") for n in rows(corpus_tables["tool_calls"], is_error=True)["tool_name"])
    denied = Counter(KIND_BY_NAME.get(m["tool_name"], "other") for m in expected if m["status"] == "denied")
    stopped = Counter(KIND_BY_NAME.get(m["tool_name"], "other") for m in expected if m["status"] != "denied")
    assert denied and stopped
    for rate in rates.iter_rows(named=True):
        kind = rate["tool_kind"]
        assert (rate["error_calls"], rate["denied_calls"], rate["interrupted_calls"]) == (
            errors[kind] - denied[kind] - stopped[kind], denied[kind], stopped[kind],
        ), kind


def test_outputs_that_quote_the_texts_are_no_denial(authored):
    calls = rows(authored["tool_calls"], session_key=QUOTED).sort("call_id")
    # Bash cat (is_error false), Read, Bash echo of the whole cancellation text (no is_error), and a
    # failed command whose output has the rejection text on its second line
    assert calls.select("call_id", "status", "is_error").rows() == [
        ("toolu_01QuotedCancelEcho000", "completed", None),
        ("toolu_01QuotedCatOutput0000", "completed", False),
        ("toolu_01QuotedFailedGrep000", "error", True),
        ("toolu_01QuotedReadResult000", "completed", None),
    ]
    assert calls.select(MAPPED[3:]).null_count().row(0) == (calls.height,) * 5
    for call in calls.iter_rows(named=True):
        result = one(authored["parts"], record_id=call["result_record_id"], part_type="tool_result")
        assert "The user doesn't want to" in result["text"]


def test_interruption_written_as_a_result_is_no_decision(authored):
    call = one(authored["tool_calls"], session_key=INTERRUPTED)
    assert {c: call[c] for c in MAPPED[2:]} == dict(
        status="interrupted", denial_kind="interrupted", permission=None, permission_decided_by=None,
        permission_evidence="text_marker", denial_reason=None,
    )
    # the same text on the user line after it is a message, not a result
    line = one(authored["records"], record_id=f"{INTERRUPTED}:d2000000-0000-4000-8000-000000000004")
    assert (line["kind"], line["native_type"]) == ("message", "user")


def test_real_refusals_naming_no_person_stay_errors(corpus_tables):
    # what Claude Code writes when it refuses without asking (claude -p) or outside the allowed folders
    starts = ("Claude requested permissions to ", "This command requires approval", "ls in '~/.claude' was blocked.")
    refused = [
        b["tool_use_id"] for path in sorted(CORPUS.rglob("*.jsonl")) for obj in objects(path) for b in blocks(obj)
        if b.get("type") == "tool_result" and b.get("is_error") is True and result_text(b).startswith(starts)
    ]
    assert len(refused) == 6  # 1.0.98 once, the 2.1.17 `claude -p` session five times
    calls = corpus_tables["tool_calls"].filter(pl.col("call_id").is_in(refused))
    assert calls.select("status", *MAPPED[3:]).unique().rows() == [("error", None, None, None, None, None)]
    assert calls.height == len(refused)
