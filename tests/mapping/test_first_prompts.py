"""sessions.first_prompt on the real Claude Code corpus: each stream's first prompt equals the one this
test finds in its files with json.loads, by the rule docs/asr-tables.md states ("First prompts")."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import polars as pl

from conftest import CORPUS

# what Claude Code writes itself into a message without author, and the context it adds to a typed one
WRAPPERS = ("[Request interrupted by user", "<bash-input>", "<ide_", "<system-reminder>", "<task-notification>")
NOT_A_PERSON = ("peer", "coordinator", "observer", "task-notification")  # origin.kind: another agent, the harness
HARNESS_HEADS = ("<command-name>", "<command-message>", "<local-command-stdout>", "<bash-stdout>", "<bash-stderr>")


def prompt_text(obj: dict) -> str | None:
    """The first-prompt text of one line, or None when the line is no person's prompt."""
    if obj.get("type") != "user" or obj.get("isMeta") or obj.get("isCompactSummary") or obj.get("forkedFrom"):
        return None
    kind = (obj.get("origin") or {}).get("kind")
    content = obj["message"]["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not blocks or blocks[0].get("type") == "tool_result" or kind in NOT_A_PERSON:
        return None
    head = (blocks[0].get("text") or "").lstrip()
    if kind != "human" and head.startswith(HARNESS_HEADS):
        return None
    texts = [b["text"][:1000] for b in blocks if b.get("type") == "text" and not b["text"].lstrip().startswith(WRAPPERS)]
    text = re.sub(r"[ \t\n\v\f\r]+", " ", " ".join(texts)).strip()
    return text[:200] or None


def command_text(obj: dict) -> str | None:
    """A slash command as the person typed it (`/name args`), or None when the line is no command."""
    if obj.get("type") != "user" or obj.get("isMeta"):
        return None
    content = obj["message"]["content"]
    text = content if isinstance(content, str) else next(
        (b.get("text") or "" for b in content if b.get("type") == "text"), "")
    name = re.search(r"<command-name>(.*?)</command-name>", text[:1000])
    if name is None:
        return None
    args = re.search(r"<command-args>(.*?)</command-args>", text[:1000])
    typed = " ".join(t for t in (name.group(1), args.group(1) if args else "") if t)
    return re.sub(r"[ \t\n\v\f\r]+", " ", typed).strip()[:200] or None


def expected_first_prompt(stream: dict) -> tuple[str | None, str | None]:
    """The first prompt of a main or subagent stream and the uuid of its line, read from its files;
    its first slash command when it holds no prompt."""
    command = None
    for name in stream["source_files"]:
        for raw in (CORPUS.parent / name).read_text(encoding="utf-8").splitlines():
            obj = json.loads(raw) if raw.strip() else {}
            if stream["stream_kind"] == "main" and (
                obj.get("sessionId") != stream["session_key"] or obj.get("isSidechain")
            ):
                continue
            text = prompt_text(obj)
            if text is not None:
                return text, obj["uuid"]
            if command is None and (typed := command_text(obj)) is not None:
                command = typed, obj["uuid"]
    return command or (None, None)


def test_every_streams_first_prompt_is_the_first_a_person_wrote(corpus_tables: Mapping[str, pl.DataFrame]):
    streams = corpus_tables["sessions"].filter(
        pl.col("stream_kind").is_in(["main", "subagent"]) & pl.col("rebuilt_from").is_null()
    )
    records = dict(corpus_tables["records"].select("record_id", "uuid").iter_rows())
    named = 0
    for stream in streams.iter_rows(named=True):
        text, uuid = expected_first_prompt(stream)
        assert stream["first_prompt"] == text, stream["session_key"]
        assert (records.get(stream["first_prompt_record_id"]) if text else stream["first_prompt_record_id"]) == uuid
        named += text is not None
    # most streams have one; the rest begin with a command (/init, /model) or hold none
    assert named > 0.75 * streams.height
