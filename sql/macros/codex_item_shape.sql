-- codex_item_shape(): the json_transform structure of a Codex rollout payload (formats/codex): the
-- payload of an enveloped line, or a whole line of the older, bare form (sql/batch/codex/codex_lines.sql).
-- Scalars read as VARCHAR, as `->>` reads them (a number as its JSON text); values whose JSON type
-- matters stay JSON. content[] and summary[] entries share one shape. `item` is the TurnItem of an
-- item_completed event (paginated threads, reference §14.3), kept as JSON here and decoded with
-- codex_turn_item_shape() for those lines alone (sql/batch/codex/codex_items.sql: a struct of its many
-- fields on every line would cost every line's decode); the session_meta fields
-- history_mode, subagent_history_start_ordinal, parent_thread_id and source, the settings of
-- thread_settings_applied, the goal of thread_goal_updated (camelCase) and the author and recipient of
-- an inter-agent message are the fields of the newer line kinds (§14.4) the mapping reads.
create or replace temp macro codex_item_shape() as '{
    "type": "VARCHAR", "role": "VARCHAR", "id": "VARCHAR", "timestamp": "VARCHAR", "cwd": "VARCHAR",
    "originator": "VARCHAR", "cli_version": "VARCHAR", "model_provider": "VARCHAR",
    "git": {"branch": "VARCHAR"}, "forked_from_id": "VARCHAR", "model": "VARCHAR", "turn_id": "VARCHAR",
    "approval_policy": "VARCHAR", "sandbox_policy": "JSON", "effort": "VARCHAR",
    "call_id": "VARCHAR", "name": "VARCHAR", "arguments": "VARCHAR", "input": "VARCHAR", "action": "JSON",
    "status": "VARCHAR", "output": "JSON", "message": "VARCHAR", "text": "VARCHAR", "new_thread_id": "VARCHAR",
    "content": [{"type": "VARCHAR", "text": "VARCHAR", "image_url": "VARCHAR"}],
    "summary": [{"type": "VARCHAR", "text": "VARCHAR", "image_url": "VARCHAR"}],
    "encrypted_content": "JSON", "exit_code": "VARCHAR", "duration": {"secs": "VARCHAR", "nanos": "VARCHAR"},
    "info": {
        "total_token_usage": {"input_tokens": "VARCHAR", "cached_input_tokens": "VARCHAR",
            "output_tokens": "VARCHAR", "reasoning_output_tokens": "VARCHAR", "total_tokens": "VARCHAR"},
        "last_token_usage": {"input_tokens": "VARCHAR", "cached_input_tokens": "VARCHAR",
            "output_tokens": "VARCHAR", "reasoning_output_tokens": "VARCHAR", "total_tokens": "VARCHAR",
            "cache_write_input_tokens": "VARCHAR", "cache_creation_input_tokens": "VARCHAR"}
    },
    "history_mode": "VARCHAR", "subagent_history_start_ordinal": "VARCHAR", "parent_thread_id": "VARCHAR",
    "source": "JSON", "tools": "JSON", "author": "VARCHAR", "recipient": "VARCHAR",
    "thread_settings": {"model": "VARCHAR", "approval_policy": "VARCHAR", "cwd": "VARCHAR",
        "reasoning_effort": "VARCHAR"},
    "goal": {"objective": "VARCHAR", "status": "VARCHAR"},
    "item": "JSON"
}'
