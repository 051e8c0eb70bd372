"""Entire Transcript Format (ETF) v1, Entire's compact `transcript.jsonl`, as ASR frames.

Used when a checkpoint session has no native transcript this project converts (Codex, Gemini,
other agents) but has `transcript.jsonl` (companion, "Fallback: the Entire Transcript Format").
Records are produced with producer.method `import` from source format `entire-transcript`,
formatVersion `1`.

ETF in brief (reference §2): one JSON object per line with `v` (1), `type` (user or assistant),
optional `agent` (registry name), `cli_version` (of the line's producer), `ts`, `id` (assistant
message id), `input_tokens`/`output_tokens` (assistant lines only) and `content` (blocks, a
string, or null). Tool results are inlined into their `tool_use` block as `result`; thinking
blocks are dropped. The frames have the columns of the core tables (batch/schema/core.py);
columns ETF cannot fill are null, and docs/architecture.md lists them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from batch.formats.rows import dump_json as _dump
from batch.formats.rows import to_frame as _frame
from batch.schema.core import INFERENCE_OBSERVATIONS, LOSSES, PARTS, RECORDS, REJECTS, SOURCE_LINES, TOOL_CALLS
from batch.sources.entire import parse_time as _time

PRODUCER_METHOD = "import"
SOURCE_FORMAT = "entire-transcript"
FORMAT_VERSION = "1"
RECORD_SOURCE = "entire_transcript"
# Agents whose ETF input_tokens is known to exclude cache: the claude-code converter copies
# Anthropic's message.usage.input_tokens, which excludes cache reads and writes, in every Entire
# version read (reference §2.1). Other agents' numbers (Codex token_count payloads, Pi usage.input)
# are not established, so they map to input_total_tokens with input_includes_cache null.
UNCACHED_INPUT_AGENTS = frozenset({"claude-code"})


@dataclass
class EtfFrames:
    """ETF lines of one session as frames with the columns of the named core tables."""

    records: pl.DataFrame  # records
    parts: pl.DataFrame  # parts
    tool_calls: pl.DataFrame  # tool_calls
    observations: pl.DataFrame  # inference_observations: one row per (stream, inference), is_selected null
    source_lines: pl.DataFrame  # source_lines
    rejects: pl.DataFrame  # rejects
    losses: pl.DataFrame  # losses
    first_line: int  # 1-based line where the checkpoint's own part starts (compact_transcript_start + 1)


def input_is_uncached(agent: str | None) -> bool:
    """Whether an ETF line's input_tokens excludes cache (input.uncached) for the agent that produced it."""
    return agent in UNCACHED_INPUT_AGENTS


def map_usage(line: dict) -> dict:
    """The companion's token mapping for one ETF line: usage columns, null when not reported."""

    def count(key: str) -> int | None:
        value = line.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    raw_input = count("input_tokens")
    uncached = input_is_uncached(line.get("agent") if isinstance(line.get("agent"), str) else None)
    return {
        "input_uncached_tokens": raw_input if uncached else None,
        # with input_tokens excluding cache, the total needs both cache classes, which ETF v1 does not write
        "input_total_tokens": None if uncached else raw_input,
        "input_includes_cache": None,
        "cache_read_tokens": count("cache_read_tokens"),
        "cache_write_tokens": count("cache_write_tokens"),
        "cache_write_5m_tokens": None,
        "cache_write_1h_tokens": None,
        "output_total_tokens": count("output_tokens"),
        "output_reasoning_tokens": count("reasoning_tokens"),
        "service_tier": None,
        "attributed_mcp_server": None,
        "attributed_mcp_tool": None,
    }


def read_etf(
    data: bytes, *, session_key: str, source_file: str, compact_transcript_start: int | None = None
) -> EtfFrames:
    """Map the bytes of one transcript.jsonl into frames.

    `compact_transcript_start` (session metadata) is the 0-based ETF line where this checkpoint's
    part starts; absent, the file is a legacy delta holding only this checkpoint's part."""
    rows = _Rows(session_key, source_file)
    offset = 0
    for number, raw in enumerate(data.split(b"\n"), start=1):
        start, offset = offset, offset + len(raw) + 1
        if raw.strip():
            _read_line(rows, raw, number, start)
    losses = _losses(session_key, rows.missing_ts, rows.inlined_results, rows.assistant_lines,
                     rows.assistant_with_tokens, bool(rows.records))
    obs = [{k: v for k, v in o.items() if k != "_has_tokens"} for o in rows.observations.values()]
    return EtfFrames(
        records=_frame(rows.records, RECORDS),
        parts=_frame(rows.parts, PARTS),
        tool_calls=_frame(rows.calls, TOOL_CALLS),
        observations=_frame(obs, INFERENCE_OBSERVATIONS),
        source_lines=_frame(rows.lines, SOURCE_LINES),
        rejects=_frame(rows.rejects, REJECTS),
        losses=_frame(losses, LOSSES),
        first_line=(compact_transcript_start or 0) + 1,
    )


@dataclass
class _Rows:
    """The rows `read_etf` collects from one transcript.jsonl, line by line, and its counts for the losses."""

    session_key: str
    source_file: str
    records: list[dict] = field(default_factory=list)
    parts: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    observations: dict[str, dict] = field(default_factory=dict)  # by message id
    lines: list[dict] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)
    missing_ts: int = 0
    inlined_results: int = 0
    assistant_lines: int = 0
    assistant_with_tokens: int = 0
    seq: int = 0
    turn_id: str | None = None


def _read_line(rows: _Rows, raw: bytes, number: int, start: int) -> None:
    """Map one non-blank ETF line (1-based `number`, at byte `start`): a rejected line, or a message
    record with its parts, tool calls, inference observation and inlined tool results."""
    session_key, source_file = rows.session_key, rows.source_file
    text = raw.decode("utf-8", "replace")
    line_row = {"source_file": source_file, "line": number, "byte_offset": start, "byte_length": len(raw),
                "session_key": session_key, "raw": None if text.encode() == raw else raw}
    line, reason, detail = _decode(text)
    if line is None:
        rows.rejects.append({"source_file": source_file, "line": number, "byte_offset": start, "byte_length": len(raw),
                             "reason": reason, "detail": detail, "first_bytes": text[:120], "raw": raw})
        rows.lines.append({**line_row, "status": "rejected", "reason": reason})
        return
    native_type = line["type"]
    position = f"line:{number}"
    record_id = f"{session_key}:{position}"
    ts = _time(line.get("ts"))
    rows.missing_ts += ts is None
    rows.seq += 1
    blocks = _blocks(line.get("content"))
    message_id = line.get("id") if isinstance(line.get("id"), str) else None
    if native_type == "user":
        prompt_id = next((b.get("id") for b in blocks if isinstance(b.get("id"), str)), None)
        rows.turn_id = prompt_id or rows.turn_id
    is_assistant = native_type == "assistant"
    rows.records.append({
        "record_id": record_id, "session_key": session_key, "seq": rows.seq,
        "kind": "message" if native_type in ("user", "assistant") else "unknown",
        "position": position, "source_file": source_file, "source_line": number, "timestamp": ts,
        # ETF user lines also hold injected text (task notifications): who wrote them is not claimed
        "author": "model" if is_assistant else None,
        "turn_id": rows.turn_id, "native_type": native_type, "message_id": message_id if is_assistant else None,
        "inference_id": message_id if is_assistant else None, "observation_count": 1,
        "record_source": RECORD_SOURCE, "native": text,
    })
    rows.lines.append({**line_row, "status": "mapped", "reason": None, "record_id": record_id})
    if is_assistant:
        _observe_inference(rows, line, message_id, record_id, position, number)
    results = _read_blocks(rows, line, blocks, record_id, position, number, ts)
    _add_results(rows, results, record_id, position, number)


def _observe_inference(
    rows: _Rows, line: dict, message_id: str | None, record_id: str, position: str, number: int
) -> None:
    """Count an assistant line and keep its message's inference observation: the first line with
    token counts, else the first line, seen with the number of lines of the message."""
    rows.assistant_lines += 1
    has_tokens = any(k in line for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                         "cache_write_tokens", "reasoning_tokens"))
    rows.assistant_with_tokens += has_tokens
    if message_id is None:
        return
    seen = rows.observations.get(message_id)
    if seen is None or (has_tokens and not seen["_has_tokens"]):
        rows.observations[message_id] = {
            "inference_id": message_id, "session_key": rows.session_key, "record_id": record_id,
            **map_usage(line), "usage_source": RECORD_SOURCE, "usage_position": position,
            "usage_source_file": rows.source_file, "usage_source_line": number,
            "line_count": (seen or {}).get("line_count", 0), "_has_tokens": has_tokens,
        }
    rows.observations[message_id]["line_count"] += 1


def _read_blocks(
    rows: _Rows, line: dict, blocks: list[dict], record_id: str, position: str, number: int, ts
) -> list[tuple[str | None, dict, int]]:
    """Add a line's blocks as parts and its tool_use blocks as tool calls. Returns the results
    inlined into those calls: (call id, result, block index)."""
    session_key = rows.session_key
    results = []
    for index, block in enumerate(blocks):
        rows.parts.append(_part(block, record_id, session_key, index, rows.source_file, number,
                                isinstance(line.get("content"), str)))
        if block.get("type") == "tool_use":
            result = block.get("result") if isinstance(block.get("result"), dict) else None
            call_id = block.get("id") if isinstance(block.get("id"), str) else None
            rows.calls.append({
                "call_id": call_id, "session_key": session_key,
                "tool_name": block.get("name") if isinstance(block.get("name"), str) else None,
                "requested_by": "model", "status": _status(result),
                "is_error": None if result is None else result.get("status") == "error",
                "call_record_id": record_id, "call_position": position, "called_at": ts,
                "input": _dump(block.get("input")), "result_native": _dump(result) if result else None,
            })
            if result is not None:
                results.append((call_id, result, index))
    return results


def _add_results(
    rows: _Rows, results: list[tuple[str | None, dict, int]], record_id: str, position: str, number: int
) -> None:
    """Add each result inlined into a line's tool calls as a tool_result record, with its part, and
    link its call to it."""
    session_key, source_file = rows.session_key, rows.source_file
    for k, (call_id, result, index) in enumerate(results, start=1):
        # the inlined result becomes a tool_result record after its call, at the same line
        rows.inlined_results += 1
        rows.seq += 1
        result_id = f"{record_id}#result{k}"
        rows.records.append({
            "record_id": result_id, "session_key": session_key, "seq": rows.seq, "kind": "tool_result",
            "position": position, "source_file": source_file, "source_line": number, "timestamp": None,
            "author": "tool", "turn_id": rows.turn_id, "native_type": "tool_use.result", "observation_count": 1,
            "record_source": RECORD_SOURCE, "native": _dump(result),
        })
        output = result.get("output")
        rows.parts.append({
            "record_id": result_id, "session_key": session_key, "part_index": 0, "part_type": "tool_result",
            "text": output if isinstance(output, str) else None, "call_id": call_id,
            "is_error": None if "status" not in result else result.get("status") == "error",
            "capture_state": "complete", "source_file": source_file, "source_line": number,
            "native_path": f"$.content[{index}].result",
        })
        for call in rows.calls:
            if call["call_record_id"] == record_id and call["call_id"] == call_id:
                call.update(result_record_id=result_id, result_position=position)


def _decode(text: str) -> tuple[dict | None, str | None, str | None]:
    try:
        line = json.loads(text)
    except ValueError as exc:
        return None, "invalid_json", str(exc)
    if not isinstance(line, dict):
        return None, "not_an_object", f"a JSON {type(line).__name__}"
    if line.get("v") != 1 or isinstance(line.get("v"), bool):
        return None, "unsupported_version", f"v is {line.get('v')!r}: only ETF v1 is read"
    if not isinstance(line.get("type"), str):
        return None, "missing_type", "an ETF line needs a string type"
    return line, None, None


def _blocks(content: object) -> list[dict]:
    # content is normally a list of blocks; a JSON string becomes one text block; null has none
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b if isinstance(b, dict) else {"type": "unknown", "value": b} for b in content]
    return []


def _part(block: dict, record_id: str, session_key: str, index: int, source_file: str, line: int, is_string: bool) -> dict:
    # v1 quirk: user text blocks carry no type
    part_type = block.get("type") if isinstance(block.get("type"), str) else "text"
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    text = block.get("text") if isinstance(block.get("text"), str) else None
    return {
        "record_id": record_id, "session_key": session_key, "part_index": index, "part_type": part_type,
        "text": text if part_type == "text" else None,
        "call_id": block.get("id") if part_type == "tool_use" and isinstance(block.get("id"), str) else None,
        "tool_name": block.get("name") if part_type == "tool_use" and isinstance(block.get("name"), str) else None,
        "tool_input": _dump(block.get("input")) if part_type == "tool_use" else None,
        "media_type": source.get("media_type") if isinstance(source.get("media_type"), str) else None,
        "capture_state": "complete", "source_file": source_file, "source_line": line,
        "native_path": "$.content" if is_string else f"$.content[{index}]",
    }


def _status(result: dict | None) -> str:
    if result is None:
        return "pending"
    return {"success": "completed", "error": "error"}.get(result.get("status"), "completed")


def _losses(
    session_key: str, missing_ts: int, inlined: int, assistant_lines: int, with_tokens: int, any_record: bool
) -> list[dict]:
    if not any_record:
        return []
    out = [
        {"category": "reasoning", "detail": "the Entire Transcript Format drops thinking and redacted_thinking blocks",
         "count": None},
        {"category": "inference.model", "detail": "the Entire Transcript Format drops the model of each response",
         "count": None},
    ]
    if inlined:
        out.append({"category": "tool_result.content", "count": inlined,
                    "detail": "ETF keeps a tool result's output (enriched from the agent's structured result), "
                              "not necessarily the content that reached the model"})
    if missing_ts:
        out.append({"category": "timestamps", "count": missing_ts, "detail": "ETF lines without ts: no timestamp"})
    if assistant_lines and not with_tokens:
        out.append({"category": "per_call_usage", "count": assistant_lines,
                    "detail": "no assistant line carries token fields (Codex ETF writes none); the checkpoint "
                              "metadata token_usage is a summary of the session"})
    elif with_tokens:
        out.append({"category": "usage.cache", "count": with_tokens,
                    "detail": "ETF v1 writes no cache read or write tokens: input totals are not reported"})
    return [{"session_key": session_key, **loss} for loss in out]
