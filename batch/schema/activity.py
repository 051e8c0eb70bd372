"""Tool activity: questions, background work, progress.

Each table here is built per batch by sql/batch/activity/<table name>.sql (see batch/pipeline.py).
"""

from __future__ import annotations

from batch.schema.base import BOOL, I64, JSON, STR, STRS, TS, Table, col

INPUT_REQUESTS = Table(
    "input_requests",
    "one row per AskUserQuestion call (call_id) per stream",
    "Questions the model asked the user (registry: AskUserQuestion → input_request with mode: questions "
    "and callId) and what came back. Questions have no native IDs: a question's id is its 0-based "
    "position as a string.",
    (
        col("call_id", STR, "tool_use.id of the AskUserQuestion call (the input request's callId)"),
        col("session_key", STR, "stream of the call"),
        col("mode", STR, "input request mode: questions"),
        col("status", STR, "answered (answers or a free-text response came back), timed_out (the result "
            "carries afkTimeoutMs: resolved while the user was away), rejected (the result is an error or "
            "a denial), unanswered (a result with no answer), pending (no result in this capture)"),
        col("call_record_id", STR, "response record holding the tool_use"),
        col("result_record_id", STR, "record holding the tool_result; null while pending"),
        col("asked_at", TS, "timestamp of the tool_use line (UTC)"),
        col("resolved_at", TS, "timestamp of the tool_result line (UTC)"),
        col("question_count", I64, "number of questions asked"),
        col("questions", JSON, "questions as asked: a list of {id, question, header, options, multiSelect}; "
            "id is the 0-based position as a string, options are the native {label, description, …} objects; "
            "read from tool_use.input, else from toolUseResult.questions", json=True),
        col("answers", JSON, "answers as a list of {question_id, question, selected} or {question_id, question, "
            "text}: toolUseResult.answers is keyed by question text, several choices joined by commas; a value "
            "(or each comma-separated piece) equal to an option label goes to selected, anything else to text "
            "(a value with no label keeps its text verbatim); question_id is null when the key matches no "
            "question; null when the result holds no answers map", json=True),
        col("response", STR, "toolUseResult.response: the user's free-text response, when recorded"),
        col("annotations", JSON, "toolUseResult.annotations as recorded (per-question notes or previews)", json=True),
        col("afk_timeout_ms", I64,
            "toolUseResult.afkTimeoutMs: the away-from-keyboard timeout that resolved the request"),
        col("is_error", BOOL, "tool_result.is_error of the result (null when absent)"),
        col("native", JSON, "native objects of the row: {tool_use, tool_result, toolUseResult}", json=True),
    ),
)

BACKGROUND_TASKS = Table(
    "background_tasks",
    "one row per background task (task_id) per stream; a launch whose result is missing has a null task_id "
    "and is keyed by its call_id",
    "Work that runs on after the call that started it (registry: Background work): a background Bash command "
    "(backgroundTaskId) is a terminal of kind shell, Monitor a terminal of kind monitor, a background agent "
    "(Agent or Task with run_in_background, result status async_launched) a subagent with async: true. "
    "The status is the latest one any native evidence recorded, in file order.",
    (
        col("task_id", STR, "native task ID: toolUseResult.backgroundTaskId (Bash), toolUseResult.taskId "
            "(Monitor), toolUseResult.agentId (background agent), or the ID named by later evidence"),
        col("session_key", STR, "stream that launched or reported the task"),
        col("task_kind", STR, "shell, monitor or subagent (workflow for a local_workflow launch); from the launching "
            "tool, else from the native task type (local_bash → shell, local_agent → subagent); null when unknown"),
        col("call_id", STR, "tool_use.id of the call that started the task; else the <tool-use-id> a task "
            "notification names"),
        col("tool_name", STR, "name of the launching tool (Bash, Monitor, Agent, Task, …)"),
        col("is_async", BOOL, "true when a launch result shows the task running on after its call returned "
            "(ASR async: true); null when no launch result is in this capture"),
        col("is_requested_background", BOOL, "the call's input asked for it (run_in_background: true); false when "
            "Claude Code moved a running foreground command to the background; null for Monitor or without a launch"),
        col("command", STR, "input.command of the launching call (shell, monitor); for a TaskStop the stopped "
            "task's command as the stop result names it"),
        col("description", STR,
            "input.description of the launching call, else the task description later evidence records"),
        col("agent_id", STR, "agentId of a background subagent (its stream is the sessions row with this agent_id)"),
        col("native_task_type", STR, "latest native task type recorded (local_bash, local_agent, local_workflow, …)"),
        col("status", STR, "latest status: running (launched, or reported running), completed, failed, killed, "
            "stopped (a successful TaskStop), pending (a background launch without result), or the native value"),
        col("status_source", STR, "evidence that set the status: launch_result, launch_call (a launch without "
            "result), task_status (attachment), "
            "task_notification, waiting_for_task (progress), task_stop (TaskStop call), kill_shell (KillShell or "
            "KillBash call), bash_output (BashOutput result), task_output (TaskOutput result)"),
        col("status_record_id", STR, "record that set the latest status"),
        col("status_at", TS, "timestamp of that record (UTC)"),
        col("launch_record_id", STR, "record holding the launching call's result; null without a launch result"),
        col("started_at", TS, "timestamp of the launch result (UTC)"),
        col("exit_code", I64,
            "exit code when a native field records one (BashOutput exitCode, TaskOutput task.exitCode): the latest"),
        col("exit_code_record_id", STR, "record whose native field holds exit_code (its evidence); null without one"),
        col("exit_code_source", STR, "bash_output or task_output: the read that recorded exit_code"),
        col("output_file", STR, "latest output file named (task notification <output-file>, task_status "
            "outputFilePath, toolUseResult.outputFile, or the launch text 'Output is being written to')"),
        col("summary", STR, "latest summary recorded (task notification <summary>, task_status deltaSummary)"),
        col("evidence_count", I64,
            "evidence items read for this task (launch, status reports, notifications, stops, reads)"),
        col("evidence_record_ids", STRS, "records holding that evidence, in file order (duplicates removed)"),
        col("native", JSON, "native fragments: {launch: the launching call's toolUseResult, latest: the native object "
            "of the latest status evidence}", json=True),
    ),
)

TOOL_PROGRESS = Table(
    "tool_progress",
    "one row per tool call (parentToolUseID) per stream that has progress lines of type bash_progress, "
    "mcp_progress, query_update, search_results_received or waiting_for_task",
    "What the progress lines of a call say, summarised: bash and MCP progress give the running call's "
    "output and status, web-search progress its queries and result counts, waiting_for_task the task a "
    "TaskOutput call waited on. Each line stays a records row (kind progress) with its native JSON; "
    "hook_progress and agent_progress are not summarised here.",
    (
        col("call_id", STR, "the call the progress belongs to: parentToolUseID of the progress lines"),
        col("session_key", STR, "stream of the progress lines"),
        col("tool_name", STR, "name of that call in tool_calls (null when the call is not in this stream)"),
        col("progress_types", STRS, "progress data types seen, in first-seen order"),
        col("update_count", I64, "progress lines of this call"),
        col("first_record_id", STR, "first progress record (file order)"),
        col("last_record_id", STR, "last progress record (file order)"),
        col("first_at", TS, "timestamp of the first progress line (UTC)"),
        col("last_at", TS, "timestamp of the last progress line (UTC)"),
        col("last_output", STR, "bash_progress output of the latest line that has one (the recent tail)"),
        col("last_full_output", STR, "bash_progress fullOutput of the latest line that has one"),
        col("elapsed_ms", I64, "largest elapsed time reported: bash_progress elapsedTimeSeconds × 1000, or "
            "mcp_progress elapsedTimeMs"),
        col("total_lines", I64, "bash_progress totalLines of the latest line that has it"),
        col("total_bytes", I64, "bash_progress totalBytes of the latest line that has it"),
        col("timeout_ms", I64, "bash_progress timeoutMs of the latest line that has it"),
        col("task_id", STR, "bash_progress taskId of the latest line that has it (the background task of the command)"),
        col("mcp_server", STR, "mcp_progress serverName"),
        col("mcp_tool", STR, "mcp_progress toolName"),
        col("mcp_status", STR, "mcp_progress status of the latest line (started, completed, failed, …)"),
        col("queries", STRS,
            "web-search queries (query_update and search_results_received query), distinct, in first-seen order"),
        col("search_count", I64, "search_results_received lines"),
        col("result_count", I64, "sum of search_results_received resultCount"),
        col("waiting_task_id", STR, "for waiting_for_task: input.task_id (or agentId) of the call that waited (TaskOutput)"),
        col("waiting_task_description", STR, "waiting_for_task taskDescription of the latest line"),
        col("waiting_task_type", STR, "waiting_for_task taskType of the latest line (local_bash, local_agent)"),
        col("native", JSON, "the latest progress line, verbatim JSON (every line is in records.native)", json=True),
    ),
)

TABLES: tuple[Table, ...] = (INPUT_REQUESTS, BACKGROUND_TASKS, TOOL_PROGRESS)
