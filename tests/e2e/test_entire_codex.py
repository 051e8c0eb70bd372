"""A Codex session kept by an Entire checkpoint: its full.jsonl (the rollout as Entire's sanitizer
rewrites it: encrypted content deleted and the line re-marshalled, reference codex-format.md §11)
goes through the Codex converter, redacted; expected values read from the lines with json.loads."""

from __future__ import annotations

import json

import polars as pl
import pytest

import batch
from conftest import FIXTURES, codex_responses, read_tables
from entire_repos import commit, init, meta, root_meta, sha256

ROLLOUT = FIXTURES / "codex" / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
CID = "c0dec0dec0de"


def sanitized(raw: bytes) -> bytes:
    """Entire's SanitizePortableTranscript as the reference describes it: on reasoning and compaction
    items `encrypted_content` is deleted and the line re-marshalled (payload keys sorted, envelope of
    timestamp, type and payload only)."""
    out = []
    for line in raw.decode().splitlines():
        obj = json.loads(line)
        payload = obj.get("payload")
        if isinstance(payload, dict) and payload.get("type") in ("reasoning", "compaction", "compaction_summary"):
            payload.pop("encrypted_content", None)
            line = json.dumps({"timestamp": obj["timestamp"], "type": obj["type"],
                               "payload": dict(sorted(payload.items()))}, separators=(",", ":"))
        out.append(line)
    return ("\n".join(out) + "\n").encode()


def checkpointed(path, sid: str, full: bytes):
    """A repository whose v1 branch holds one checkpoint (CID) of the Codex session `sid`, its
    full.jsonl `full`."""
    work = init(path)
    base = f"{CID[:2]}/{CID[2:]}"
    commit(work, "refs/heads/entire/checkpoints/v1", {
        f"{base}/metadata.json": root_meta(CID, ["0"], base=base),
        f"{base}/0/metadata.json": meta(session_id=sid, checkpoint_id=CID, agent="Codex",
                                        created_at="2026-02-23T20:40:00Z"),
        f"{base}/0/full.jsonl": full,
        f"{base}/0/content_hash.txt": sha256(full).encode(),
    }, f"Checkpoint: {CID}")
    return work


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    base = tmp_path_factory.mktemp("entire-codex")
    full = sanitized(ROLLOUT.read_bytes())
    sid = json.loads(full.split(b"\n", 1)[0])["payload"]["id"]
    work = checkpointed(base / "work", sid, full)
    out = base / "out"
    batch.convert([work], out)
    return sid, full, read_tables(out)


def test_the_rollout_goes_through_the_codex_converter_redacted(converted):
    sid, _, tables = converted
    (row,) = tables["sessions"].filter(pl.col("session_key") == sid).to_dicts()
    assert (row["agent"], row["producer_source"], row["content_level"]) == ("codex", "codex-rollout-jsonl", "redacted")
    assert json.loads(row["meta"])["io.entire/checkpoint"] == CID
    assert row["source_files"] == [f"work/{CID}/0/full.jsonl"]
    assert not tables["losses"].filter(pl.col("category").str.starts_with("entire.")).height


def test_every_line_is_accounted_for_and_usage_is_the_rule(converted):
    sid, full, tables = converted
    objects = [json.loads(line) for line in full.decode().splitlines() if line.strip()]
    assert tables["source_lines"].filter(pl.col("session_key") == sid).height == len(objects)
    expected = codex_responses(objects)
    inferences = tables["inferences"].filter(pl.col("session_key") == sid)
    assert inferences.height == len(expected)
    assert inferences["input_total_tokens"].sum() == sum(r["input_tokens"] for r in expected)
    assert inferences["cache_read_tokens"].sum() == sum(r["cached_input_tokens"] for r in expected)
    assert inferences["output_total_tokens"].sum() == sum(r["output_tokens"] for r in expected)
    assert inferences["output_reasoning_tokens"].sum() == sum(r["reasoning_output_tokens"] for r in expected)
    # per-call usage converted: the checkpoint's token_usage is no usage summary
    assert not tables["usage_summaries"].filter(pl.col("session_key") == sid).height


def test_a_session_held_as_a_file_and_by_a_checkpoint_is_one_session(converted, tmp_path):
    """The rollout in ~/.codex/sessions and its redacted copy in the checkpoint: one session, its
    records from the file (full), every line of the copy a duplicate of the record at its position."""
    sid, full, _ = converted
    work = checkpointed(tmp_path / "work", sid, full)
    day = tmp_path / "sessions" / "2026" / "02" / "23"
    day.mkdir(parents=True)
    (day / ROLLOUT.name).write_bytes(ROLLOUT.read_bytes())
    copy = f"work/{CID}/0/full.jsonl"
    own = f"sessions/2026/02/23/{ROLLOUT.name}"
    objects = [json.loads(line) for line in ROLLOUT.read_text(encoding="utf-8").splitlines() if line.strip()]
    outputs = []
    for order, batch_bytes in (([tmp_path / "sessions", work], None), ([work, tmp_path / "sessions"], 1)):
        out = tmp_path / f"out-{len(outputs)}"
        batch.convert(order, out, **({"batch_bytes": batch_bytes} if batch_bytes else {}))
        t = read_tables(out)
        (row,) = t["sessions"].filter(pl.col("session_key") == sid).to_dicts()
        assert row["content_level"] == "full"
        assert row["source_files"] == sorted([own, copy])
        assert json.loads(row["meta"])["io.entire/checkpoint"] == CID
        lines = t["source_lines"].filter(pl.col("session_key") == sid)
        assert lines.filter(pl.col("source_file") == own).height == len(objects)
        copied = lines.filter(pl.col("source_file") == copy).sort("line")
        assert copied.height == len(objects)
        assert set(copied["status"]) == {"duplicate"} and set(copied["reason"]) == {"stream_copy"}
        # each copied line points at the record its position holds in the file
        kept = lines.filter(pl.col("source_file") == own).sort("line")
        assert copied["record_id"].to_list() == kept["record_id"].to_list()
        records = t["records"].filter(pl.col("session_key") == sid)
        assert records.height == kept.filter(pl.col("status") == "mapped").height
        assert records["record_id"].n_unique() == records.height
        # the records are the file's lines, not the redacted copy's
        assert records.filter(pl.col("native").str.contains("encrypted_content")).height == sum(
            1 for o in objects if "encrypted_content" in json.dumps(o))
        inferences = t["inferences"].filter(pl.col("session_key") == sid)
        assert inferences.height == len(codex_responses(objects))
        outputs.append({name: t[name].drop(c for c in ("source_last_read_at",) if c in t[name].columns)
                        .sort(pl.all()) for name in ("sessions", "records", "inferences", "source_lines")})
    for name in outputs[0]:
        assert outputs[0][name].equals(outputs[1][name]), name
