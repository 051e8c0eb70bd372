"""Property test: real transcript lines, mutated the ways files go bad, never break a run.

Each case takes a real transcript from the corpus, applies one mutation and converts it through
the CLI. It checks that the run ends in exit 0 (or one `Error:` line and exit 1), never a
traceback; that every non-blank physical line is in source_lines; and that the lines the
mutation did not touch give the same records as the clean file.

`make test` runs a few dozen cases; ASR_FUZZ_EXAMPLES=2000 runs a longer search.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from functools import cache
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batch.cli import main
from conftest import CORPUS

SOURCES = {
    "2.1.38": CORPUS / "marot-spotter" / "short.jsonl",
    "2.0.28": CORPUS / "daaain-claude-code-log" / "-Users-dain-workspace-danieldemmel-me-next"
    / "5ed31c36-bca8-40fd-8d24-f1a1f0af7901.jsonl",
    "1.0.98": CORPUS / "d-kimuson-claude-code-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
}
NAME = "33333333-3333-4333-8333-333333333333.jsonl"  # as Claude Code names a session file
# Fields the converter reads (dotted paths; a number indexes a list). A mutation replaces the
# value of one that the line has with a value of another JSON type.
FIELDS = [
    "type", "uuid", "parentUuid", "logicalParentUuid", "sessionId", "timestamp", "version", "cwd", "gitBranch",
    "isSidechain", "isMeta", "userType", "requestId", "promptId", "permissionMode", "toolUseID",
    "parentToolUseID", "subtype", "content", "level", "summary", "leafUuid", "messageId", "snapshot",
    "data", "data.type", "data.hookEvent", "toolUseResult", "message", "message.role", "message.id",
    "message.model", "message.content", "message.content.0", "message.content.0.type", "message.content.0.text",
    "message.content.0.id", "message.content.0.input", "message.content.0.tool_use_id",
    "message.content.0.content", "message.stop_reason", "message.usage", "message.usage.input_tokens",
    "message.usage.output_tokens", "message.usage.cache_read_input_tokens",
    "message.usage.cache_creation_input_tokens", "message.usage.cache_creation",
]
JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
EXAMPLES = int(os.environ.get("ASR_FUZZ_EXAMPLES", "20"))


@cache
def lines_of(version: str) -> tuple[bytes, ...]:
    return tuple(SOURCES[version].read_bytes().split(b"\n")[:-1])


def _get_parent(obj, path: list[str]):
    for key in path[:-1]:
        if isinstance(obj, dict) and key in obj:
            obj = obj[key]
        elif isinstance(obj, list) and key.isdigit() and int(key) < len(obj):
            obj = obj[int(key)]
        else:
            return None
    return obj


@st.composite
def mutated(draw):
    """(version, file bytes, touched line numbers or None for every line)."""
    version = draw(st.sampled_from(sorted(SOURCES)))
    lines = list(lines_of(version))
    i = draw(st.integers(0, len(lines) - 1))
    line = lines[i]
    kind = draw(st.sampled_from(
        ["truncate", "flip", "invalid_utf8", "nul", "bom", "crlf", "huge", "deep", "retype", "non_object", "no_final_newline"]
    ))
    touched: set[int] | None = {i + 1}
    end = b"\n"
    if kind == "truncate":
        lines[i] = line[: draw(st.integers(0, max(0, len(line) - 1)))]
    elif kind == "flip":
        pos = draw(st.integers(0, len(line) - 1))
        lines[i] = line[:pos] + bytes([draw(st.integers(0, 255))]) + line[pos + 1 :]
        if b"\n" in lines[i]:
            touched = None  # a new newline splits the line: numbering after it shifts
    elif kind in ("invalid_utf8", "nul"):
        pos = draw(st.integers(0, len(line)))
        lines[i] = line[:pos] + (b"\xff\xfe\xc3" if kind == "invalid_utf8" else b"\x00") + line[pos:]
    elif kind == "bom":
        lines[0] = b"\xef\xbb\xbf" + lines[0]
        touched = set()  # stripped: every line reads as in the clean file
    elif kind == "crlf":
        lines = [x + b"\r" for x in lines]
        touched = None
    elif kind == "huge":
        lines[i] = line[:1] + b'"pad":"' + b"x" * 3_000_000 + b'",' + line[1:]
    elif kind == "deep":
        depth = draw(st.integers(100, 20_000))
        lines[i] = line[:1] + b'"deep":' + b"[" * depth + b"]" * depth + b"," + line[1:]
    elif kind == "retype":
        obj = json.loads(line)
        path = draw(st.sampled_from(FIELDS)).split(".")
        parent = _get_parent(obj, path)
        key = path[-1]
        if isinstance(parent, dict) and key in parent:
            parent[key] = draw(JSON_VALUES)
        elif isinstance(parent, list) and key.isdigit() and int(key) < len(parent):
            parent[int(key)] = draw(JSON_VALUES)
        else:
            return version, b"\n".join(lines) + end, set()  # the line lacks that field: unchanged
        lines[i] = json.dumps(obj).encode()
    elif kind == "non_object":
        lines[i] = draw(st.sampled_from([b"[1,2]", b'"text"', b"42", b"null", b"true", b"[]", b"{"]))
    elif kind == "no_final_newline":
        end = b""
        touched = set()
    return version, b"\n".join(lines) + end, touched


def convert(data: bytes, folder: Path) -> tuple[int, str, Path]:
    src = folder / "projects" / "-home-user-project"
    src.mkdir(parents=True)
    (src / NAME).write_bytes(data)
    out = folder / "out"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["convert", str(src), "--out", str(out), "-q"])
        except SystemExit as exc:
            code = exc.code or 0
    return code, err.getvalue(), out


def nonblank_lines(data: bytes) -> int:
    """Non-blank physical lines, counted here without the converter."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    return sum(1 for p in pieces if not re.fullmatch(r"\s*", p.decode("utf-8", "replace")))


def outcome(out: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    lines = pl.read_parquet(out / "source_lines" / "*.parquet").select("line", "sub", "record_id")
    records = pl.read_parquet(out / "records" / "*.parquet").select(
        "record_id", "kind", "native_type", "uuid", "message_id", "model", "native"
    )
    return lines, records


@cache
def clean(version: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    with tempfile.TemporaryDirectory() as folder:
        code, err, out = convert(b"\n".join(lines_of(version)) + b"\n", Path(folder))
        assert code == 0, err
        return outcome(out)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_real_lines_never_break_a_run_and_lose_nothing(case):
    version, data, touched = case
    with tempfile.TemporaryDirectory() as folder:
        code, err, out = convert(data, Path(folder))
        assert "Traceback" not in err
        if code != 0:
            assert code == 1 and len(err.splitlines()) == 1 and err.startswith("Error: "), err
            return
        assert err == ""
        lines, records = outcome(out)
        assert lines.get_column("line").n_unique() == nonblank_lines(data)
        if touched is None:
            return
        base_lines, base_records = clean(version)
        untouched = ~pl.col("line").is_in(sorted(touched))
        same = lines.filter(untouched).sort("line", "sub", nulls_last=False)
        expected = base_lines.filter(untouched).sort("line", "sub", nulls_last=False)
        assert same.equals(expected), "lines the mutation did not touch went into other records"
        # records made only of untouched lines, in both runs, read the same
        mixed = base_lines.filter(~untouched).get_column("record_id").implode()
        keep = pl.col("record_id").is_in(expected.get_column("record_id").implode()) & ~pl.col("record_id").is_in(mixed)
        assert records.filter(keep).sort("record_id").equals(base_records.filter(keep).sort("record_id"))
