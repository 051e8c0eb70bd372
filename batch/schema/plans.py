"""Plans, memory, instructions and request context.

Each table here is built per batch by sql/batch/plans/<table name>.sql (see batch/pipeline.py).
"""

from __future__ import annotations

from batch.schema.base import BOOL, I64, JSON, STR, STRS, TS, Table, col

PLANS = Table(
    "plans",
    "one row per plan version or plan operation: a plan tool call (call_id), a task_reminder "
    "attachment, or a changed user-line todos snapshot",
    "Plans (registry: ExitPlanMode input plan → plan with planType: document, planId from the plan "
    "file name, source the plan file; TodoWrite → planType: items; Task tools → planType: items with "
    "entryId, owner and blockedBy). The items of an items plan are rows of plan_items.",
    (
        col("record_id", STR, "record holding the plan: the response with the tool call, the task_reminder "
            "attachment, the user record carrying a todos snapshot, or a Codex Plan item"),
        col("session_key", STR, "stream of the record"),
        col("call_id", STR, "tool_use.id of the plan tool call; null for attachments and todos snapshots"),
        col("tool_name", STR, "ExitPlanMode, TodoWrite, TaskCreate, TaskUpdate, TaskList or TaskGet; null when "
            "the row is not a tool call"),
        col("plan_source", STR, "where the row was read: tool_call, task_reminder (attachment listing the task "
            "list) or todos_snapshot (the `todos` state a user line carries, kept only when it differs from the "
            "stream's previous todo state), or plan_item (a Codex paginated thread's Plan item)"),
        col("plan_id", STR, "plan identity, deterministic: ExitPlanMode → the plan file name without extension "
            "(~/.claude/plans/<slug>.md → <slug>), else the record's slug (which names plan files), else the "
            "call_id; TodoWrite and todos snapshots → `todos:<sessionId>-agent-<agentId>`, the stem of Claude "
            "Code's todo file (~/.claude/todos/…json; agentId is the sessionId for a main session and "
            "`sidechain-<root uuid>` for an inline 1.0.x sidechain); Task tools and task_reminder → "
            "`tasks:<sessionId>`, the default task-list folder (~/.claude/tasks/<sessionId>/), shared by a "
            "session and its subagents; a Codex Plan item → its id"),
        col("plan_type", STR, "document (ExitPlanMode, a Codex Plan item) or items (TodoWrite, Task tools, "
            "task_reminder, todos)"),
        col("op", STR, "what the row does to the plan: replace (the whole plan written: ExitPlanMode, TodoWrite, a "
            "Codex Plan item), "
            "snapshot (the whole list as observed: TaskList, task_reminder, todos), create (TaskCreate), "
            "update (TaskUpdate) or read (TaskGet)"),
        col("source", STR, "plan file the document plan was written to (ExitPlanMode toolUseResult.filePath); "
            "null when not recorded"),
        col("content", STR, "document plan text: ExitPlanMode input.plan, else toolUseResult.plan; null when "
            "neither holds it (2.1.x writes the plan to the file only); a Codex Plan item's text"),
        col("item_count", I64, "rows of plan_items for this row (items listed or touched); null for a document plan"),
        col("call_status", STR, "status of the tool call (tool_calls.status: completed, error, denied, cancelled, "
            "interrupted, pending); null when the row is not a tool call"),
        col("result_record_id", STR, "record holding the tool result; null while pending or when not a tool call"),
        col("position", STR, "position of the record (records.position)"),
        col("recorded_at", TS, "timestamp of the record (UTC)"),
        col("result_native", JSON, "toolUseResult of the call, verbatim (oldTodos/newTodos, {task}, "
            "{success, taskId, updatedFields, statusChange}, {tasks}, {plan, isAgent, filePath})", json=True),
        col("native", JSON, "the native object the row came from, verbatim: the tool_use block, the attachment "
            "object, the user line's todos array, or a Codex Plan item", json=True),
    ),
)

PLAN_ITEMS = Table(
    "plan_items",
    "one row per item of an items plan row (plans.plan_type = items), in native order",
    "Entries of todo lists and task lists. TaskCreate and TaskUpdate touch one entry and state only "
    "the fields they set: a null column means the row does not state it.",
    (
        col("record_id", STR, "record of the plans row (plans.record_id)"),
        col("session_key", STR, "stream of the record"),
        col("call_id", STR, "tool_use.id of the plans row; null for attachments and todos snapshots"),
        col("plan_id", STR, "plan the item belongs to (plans.plan_id)"),
        col("item_index", I64, "0-based position of the item in the native list (0 for a single-entry call)"),
        col("entry_id", STR, "entry ID: the task id (TaskCreate toolUseResult.task.id, TaskUpdate/TaskGet taskId, "
            "TaskList/task_reminder id), or the todo id written by 1.0.x TodoWrite; null when none is recorded"),
        col("content", STR, "item text: the todo content, or the task subject"),
        col("description", STR, "task description"),
        col("status", STR, "item status as recorded (pending, in_progress, completed, …); for TaskUpdate the new status"),
        col("previous_status", STR, "status before a TaskUpdate (toolUseResult.statusChange.from)"),
        col("active_form", STR, "activeForm: the present-continuous label shown while the item runs"),
        col("priority", STR, "todo priority written by 1.0.x TodoWrite (high, medium, low)"),
        col("owner", STR, "task owner (agent or teammate name)"),
        col("blocked_by", STRS, "entry IDs this entry waits for (blockedBy; for TaskUpdate the IDs it adds, addBlockedBy)"),
        col("blocks", STRS, "entry IDs waiting for this entry (blocks; for TaskUpdate the IDs it adds, addBlocks)"),
        col("native", JSON, "the item as recorded, verbatim (for TaskCreate and TaskUpdate the tool input)", json=True),
    ),
)

INSTRUCTIONS = Table(
    "instructions",
    "one row per instruction file loaded (an entry of an instructions attachment, or a nested_memory "
    "attachment) and per tool-definition change (a non-empty deferred_tools_delta attachment)",
    "Instructions given to the model (registry: instruction files in the instructions attachment map by "
    "type: User → user, Project → project, Local → local, Managed → managed, AutoMem → memory; "
    "deferred_tools_delta → instructions with kind: tool_definitions and removed).",
    (
        col("record_id", STR, "attachment record"),
        col("session_key", STR, "stream of the record"),
        col("instruction_kind", STR, "instruction_file or tool_definitions"),
        col("attachment_type", STR, "native attachment type: instructions, nested_memory or deferred_tools_delta"),
        col("file_index", I64, "0-based position of the file in the instructions attachment's files list; null otherwise"),
        col("scope", STR, "user, project, local, managed or memory, from the file type; null for another or "
            "missing type (kept in file_type) and for tool definitions"),
        col("file_type", STR, "native instruction file type (User, Project, Local, Managed, AutoMem, …)"),
        col("path", STR, "path of the instruction file"),
        col("display_path", STR, "displayPath of a nested_memory attachment"),
        col("content", STR, "text given to the model: the file content; for tool definitions the addedLines "
            "joined by newlines"),
        col("added", STRS, "tool names added (deferred_tools_delta addedNames); null for files"),
        col("removed", STRS, "tool names removed (removedNames); null for files"),
        col("readded", STRS, "tool names announced again (readdedNames); null when not recorded"),
        col("position", STR, "position of the record (records.position)"),
        col("recorded_at", TS, "timestamp of the record (UTC)"),
        col("native", JSON, "the file entry, or the attachment object, verbatim", json=True),
    ),
)

CAPABILITY_CHANGES = Table(
    "capability_changes",
    "one row per MCP server reported failed or needing authentication by a deferred_tools_delta, on change only",
    "Capability changes (registry: deferred_tools_delta failed and needs-auth MCP servers → "
    "config_change.capability with op: fail or needs_auth). A server listed with the same op by the "
    "stream's previous delta that carries server lists is a repeat, not a change, and gets no row; an "
    "absent list counts as empty.",
    (
        col("record_id", STR, "deferred_tools_delta attachment record"),
        col("session_key", STR, "stream of the record"),
        col("server", STR, "MCP server name (the list entry, or its name field)"),
        col("op", STR, "fail (failedMcpServers) or needs_auth (needsAuthMcpServers)"),
        col("error_code", STR, "errorCode of a failed server entry, when recorded"),
        col("error", STR, "error message of a failed server entry, when recorded"),
        col("position", STR, "position of the record (records.position)"),
        col("recorded_at", TS, "timestamp of the record (UTC)"),
        col("native", JSON, "the list entry, verbatim (a string or an object)", json=True),
    ),
)

MEMORY_CHANGES = Table(
    "memory_changes",
    "one row per write to a memory store: a file tool call (call_id) whose target is a memory file, "
    "or one written path of a memory_saved event",
    "Memory changes (registry: a write to the project memory directory (~/.claude/projects/<encoded "
    "working directory>/memory/, flagged memdirStamped on the result) or a memory_saved {writtenPaths} "
    "event → memory_change {store: auto_memory, scope: project, op: add | update, target.path, "
    "cause.callId}, status applied when the write's result succeeded; writes under "
    "~/.claude/agent-memory/<agentType>/ → store: agent_memory, scope: agent).",
    (
        col("record_id", STR, "record the change was observed in: the tool result record (the call record "
            "while pending), or the memory_saved record"),
        col("session_key", STR, "stream of the record"),
        col("store", STR, "auto_memory or agent_memory"),
        col("scope", STR, "project (auto memory) or agent (agent memory)"),
        col("op", STR, "add (Write result type create) or update (Write result type update, Edit, MultiEdit, "
            "NotebookEdit); for a memory_saved path, update when the stream shows an earlier applied write of that "
            "path, else add (the first write this transcript shows); null when not recorded (a Write without result)"),
        col("target_path", STR, "path of the memory file written"),
        col("agent_type", STR, "agent type named by an agent-memory path (…/agent-memory/<agentType>/)"),
        col("cause_call_id", STR, "tool_use.id of the write (cause.callId); null for memory_saved"),
        col("tool_name", STR, "tool that wrote (Write, Edit, MultiEdit, NotebookEdit); null for memory_saved"),
        col("evidence", STR, "tool_write (a file tool call) or memory_saved (the event listing written paths)"),
        col("is_memdir_stamped", BOOL, "toolUseResult.memdirStamped as recorded; null when absent"),
        col("status", STR, "applied (the result succeeded, or memory_saved reports it), failed (error result) "
            "or unknown (no result in this capture)"),
        col("position", STR, "position of record_id (records.position)"),
        col("recorded_at", TS, "timestamp of record_id (UTC)"),
        col("result_native", JSON, "toolUseResult of the write, verbatim", json=True),
        col("native", JSON, "the tool_use block, or the memory_saved line, verbatim", json=True),
    ),
)

REQUEST_CONTEXTS = Table(
    "request_contexts",
    "one row per api-request record",
    "Request context (registry: each api-request record describes the request of the call whose "
    "message.id its requestRef maps to: base → prefixFrom.inferenceId, keep → prefixFrom.count, tail → "
    "entries as blobs holding the messages from api-request-blob, params → inference.params; the unit is "
    "one message; requestDigest only when it is a SHA-256 of the request bytes). No real sample exists: the fields read "
    "are id, requestRef, base, keep, tail, params, querySource, shapeHash and requestDigest.",
    (
        col("record_id", STR, "api-request record"),
        col("session_key", STR, "stream of the record"),
        col("api_request_id", STR, "native id of the api-request record"),
        col("request_ref", STR, "native requestRef (the id field when requestRef is absent)"),
        col("inference_id", STR, "message.id the requestRef maps to: the assistant response whose requestId or "
            "message.id equals it; null when not resolvable in the stream"),
        col("base_ref", STR, "native base: the earlier request this one extends"),
        col("prefix_inference_id", STR, "prefixFrom.inferenceId: message.id of the base request's response (the base "
            "api-request's inference_id, or the response the base names directly)"),
        col("prefix_count", I64, "prefixFrom.count: messages kept from the base request (native keep); the unit is one message"),
        col("tail_hashes", STRS, "blob hashes of the messages appended after the kept prefix (native tail), in order"),
        col("tail_entries", JSON, "entries as blobs: a list of {hash, message} in tail order, message taken from the "
            "api-request-blob record with that hash in the session (null when no such blob is in the capture)", json=True),
        col("unresolved_tail_count", I64, "tail hashes with no api-request-blob in the capture"),
        col("params", JSON, "request params (inference.params), verbatim", json=True),
        col("query_source", STR, "native querySource"),
        col("shape_hash", STR, "native shapeHash (the api-request-shape holding the system prompt and tools)"),
        col("request_digest", STR, "requestDigest: a SHA-256 of the request bytes, filled only when the capture "
            "shows what was hashed. No Claude Code record does (the request bytes are not kept, and a 64-hex value "
            "proves nothing), so it is null; the recorded value is request_digest_native"),
        col("request_digest_native", STR, "requestDigest as recorded, unverified (vendor key "
            "com.anthropic.claude-code/requestDigest)"),
        col("position", STR, "position of the record (records.position)"),
        col("recorded_at", TS, "timestamp of the record (UTC)"),
        col("native", JSON, "the api-request line, verbatim", json=True),
    ),
)

TABLES: tuple[Table, ...] = (PLANS, PLAN_ITEMS, INSTRUCTIONS, CAPABILITY_CHANGES, MEMORY_CHANGES, REQUEST_CONTEXTS)
