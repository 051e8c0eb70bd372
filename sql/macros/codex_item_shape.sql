-- codex_item_shape(): the json_transform structure of a Codex rollout payload (formats/codex): the
-- payload of an enveloped line, or a whole line of the older, bare form (sql/batch/codex_lines.sql).
-- Scalars read as VARCHAR, as `->>` reads them (a number as its JSON text); values whose JSON type
-- matters stay JSON. content[] and summary[] entries share one shape.
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
    }
}'
