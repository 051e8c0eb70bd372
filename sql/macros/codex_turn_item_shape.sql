-- codex_turn_item_shape(): the json_transform structure of the TurnItem an item_completed event holds
-- (payload.item, paginated threads: reference §14.3), as sql/batch/codex/codex_lines.sql reads it. Tags are
-- PascalCase (UserMessage, AgentMessage, Reasoning, CommandExecution, McpToolCall, FileChange,
-- WebSearch, CollabAgentToolCall, SubAgentActivity, Plan, ContextCompaction, ...); fields snake_case
-- but McpToolCall's camelCase ones, of which only server, tool, arguments, status, result, error and
-- duration are read. Scalars read as VARCHAR; values whose JSON type matters stay JSON.
create or replace temp macro codex_turn_item_shape() as '{
    "type": "VARCHAR", "id": "VARCHAR", "phase": "VARCHAR", "text": "VARCHAR",
    "content": [{"type": "VARCHAR", "text": "VARCHAR", "image_url": "VARCHAR", "path": "VARCHAR"}],
    "summary_text": ["VARCHAR"],
    "command": "JSON", "cwd": "VARCHAR", "source": "VARCHAR", "status": "VARCHAR",
    "aggregated_output": "VARCHAR", "exit_code": "VARCHAR", "duration": {"secs": "VARCHAR", "nanos": "VARCHAR"},
    "server": "VARCHAR", "tool": "VARCHAR", "arguments": "JSON", "result": "JSON", "error": "JSON",
    "changes": "JSON", "stdout": "VARCHAR", "query": "VARCHAR", "action": "JSON",
    "receiver_thread_ids": ["VARCHAR"], "prompt": "VARCHAR",
    "kind": "VARCHAR", "agent_thread_id": "VARCHAR", "agent_path": "VARCHAR",
    "name": "VARCHAR", "output": "JSON"
}'
