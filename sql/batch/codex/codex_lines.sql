-- codex_lines: one row per non-blank line of a Codex rollout file (formats/codex), its envelope and
-- the payload fields the mapping reads (reference codex-format.md §2 to §9), with the content blocks
-- of a message (`content[]`) or reasoning item (`summary[]`) as a list (`blocks`).
-- reads: codex_input
-- result: large
-- Envelope (0.32+): {timestamp, type, payload}; legacy (before 0.32): the first line is the session
-- meta itself ({id, timestamp, instructions}) and items are bare ({"type": "message", ...}), with
-- {"record_type": "state"} markers. A line that is not a JSON object is rejected with the reason;
-- any other kind, payload type or key is kept (kind unknown), never rejected.
-- Each line is parsed once (json_transform, the payload's shape in sql/macros/codex_item_shape.sql),
-- as sql/batch/decode/observations.sql decodes Claude Code's lines: a failed decode (TRY makes it null) is
-- not JSON; a decoded text whose first character is not `{` is another JSON value (json_valid is
-- asked of those only). A bare line is decoded a second time with the payload's shape. A field of
-- another JSON type than its shape's reads as null, or as its JSON text where the shape says VARCHAR
-- (as `->>` reads it); the line is kept verbatim in records.native whatever it holds. The exit code
-- and run time of a command are read from its exec_command_end event or its output (outcomes below).
-- Paginated threads (§14.3, §14.4): each line's top-level `ordinal` and the fields of the newer line
-- kinds are read in the same decode, an item_completed event's TurnItem as its JSON (`item_json`,
-- decoded by sql/batch/codex/codex_items.sql for those lines alone); the file's mode and its
-- inherited-context cutoff are its first session_meta's (`inherited`, `threaded`).
with decoded as (
    select
        file_idx, line,
        try(json_transform(text,
            '{"timestamp": "VARCHAR", "ordinal": "VARCHAR", "type": "VARCHAR", "id": "VARCHAR", "record_type": "JSON", '
            || '"payload": ' || codex_item_shape() || '}')) as e,
        starts_with(ltrim(text, ' ' || chr(9) || chr(13)), '{') as is_brace,
        text,
    from codex_input
),

objects as (
    select
        file_idx, line, text,
        case when e is not null and is_brace then e end as e,
        e is not null and is_brace as is_object,
        case when e is not null and is_brace then true else coalesce(json_valid(text), false) end as is_json,
    from decoded
),

-- enveloped: the payload is a JSON object. One of its fields read says so; a payload with none of
-- them (an empty object, or a value of another type) is asked of the text itself.
enveloped as (
    select
        *,
        case
            when e.payload is null then false
            when coalesce(e.payload.type, e.payload.id, e.payload.cwd, e.payload.model, e.payload.message,
                e.payload.turn_id, e.payload.call_id, e.payload.timestamp, e.payload.text, e.payload.role)
                is not null then true
            else coalesce(json_type(text, '$.payload') = 'OBJECT', false)
        end as enveloped,
    from objects
),

kinds as (
    select
        file_idx, line, is_json, is_object, enveloped, e, text,
        case
            when not is_object then null
            when enveloped and e.type is not null then e.type
            when line = 1 and e.type is null and e.id is not null then 'session_meta'
            when e.record_type is not null and e.type is null then 'legacy_state'
            when e.type in ('message', 'reasoning', 'function_call', 'function_call_output',
                'custom_tool_call', 'custom_tool_call_output', 'local_shell_call', 'web_search_call')
                and e.payload is null
                then 'response_item'
            else coalesce(e.type, 'unknown')
        end as line_type,
        case
            when enveloped then e.payload
            when is_object then json_transform(text, codex_item_shape())
        end as p,
    from enveloped
),

fields as (
    select
        file_idx, line, is_json, is_object, line_type, enveloped,
        try_cast(coalesce(e.timestamp, case when line_type = 'session_meta' then p.timestamp end) as timestamptz)
            as timestamp,
        p.type as payload_type,
        p.role as role,
        p.id as meta_id,
        -- when the thread was created (§3): a session_meta's own timestamp, not the line's write time
        case when line_type = 'session_meta' then try_cast(p.timestamp as timestamptz) end as meta_created_at,
        p.cwd as cwd,
        p.originator as originator,
        p.cli_version as cli_version,
        p.model_provider as model_provider,
        p.git.branch as git_branch,
        p.forked_from_id as forked_from_id,
        case when line_type = 'turn_context' then p.model end as context_model,
        -- the settings a turn_context records (§4): config changes where they change (tables.session_events)
        case when line_type = 'turn_context' then p.approval_policy end as context_approval_policy,
        case when line_type = 'turn_context' then
            case when starts_with(p.sandbox_policy, '"') then p.sandbox_policy ->> '$' else json(p.sandbox_policy) end
        end as context_sandbox_policy,
        case when line_type = 'turn_context' then p.effort end as context_effort,
        case when line_type = 'turn_context' or p.type in ('task_started', 'turn_started') then p.turn_id end as turn_id,
        -- the turn a turn's end names (§8): its own record's turn, not carried to the lines after it
        case when line_type = 'event_msg' and p.type in ('task_complete', 'turn_complete', 'turn_aborted')
            then p.turn_id end as end_turn_id,
        p.call_id as call_id,
        p.name as tool_name,
        case
            when p.type = 'function_call' then
                case when json_valid(p.arguments) then p.arguments else to_json(p.arguments) end
            when p.type = 'custom_tool_call' then to_json(p.input)
            when p.type in ('local_shell_call', 'web_search_call') then json(p.action)
            when p.type = 'tool_search_call' then json(p.arguments)
        end as tool_input,
        case when enveloped then p.status end as native_status,
        -- exec_command_end (extended files, §6): the command's exit code and duration {secs, nanos}
        case when line_type = 'event_msg' and p.type = 'exec_command_end' then try_cast(p.exit_code as bigint) end
            as end_exit_code,
        case when line_type = 'event_msg' and p.type = 'exec_command_end' then
            round(try_cast(p.duration.secs as double) * 1000 + coalesce(try_cast(p.duration.nanos as double), 0) / 1e6)
        end as end_duration_ms,
        case
            when starts_with(p.output, '"') then p.output ->> '$'
            when starts_with(p.output, '[') then array_to_string(
                list_filter(json_extract_string(p.output, '$[*].text'), lambda x: x is not null), '\n')
            when line_type = 'response_item' and p.type = 'tool_search_output' then cast(p.tools as varchar)
        end as output_text,
        -- the text an event copy repeats: user_message and agent_message `message`, agent_reasoning `text`
        case
            when line_type = 'event_msg' and p.type in ('user_message', 'agent_message') then p.message
            when line_type = 'event_msg' and p.type = 'agent_reasoning' then p.text
        end as event_text,
        case
            when p.type = 'message' then coalesce(array_to_string(
                list_filter(list_transform(p.content, lambda b: b.text), lambda x: x is not null), '\n'), '')
        end as item_text,
        list_transform(p.summary, lambda b: b.text) as summary_texts,
        coalesce(starts_with(p.encrypted_content, '"'), false) as has_encrypted,
        p.message as compacted_text,
        -- a subagent thread the line says this one spawned (extended event_msg, reference §10)
        case when line_type = 'event_msg' and p.type = 'collab_agent_spawn_end' then p.new_thread_id end
            as spawned_thread,
        -- (and an inter-agent agent_message item's: formats/codex/converter.py keeps those of paginated files)
        case
            when p.type = 'message' then p.content
            when p.type = 'reasoning' then p.summary
            when p.type = 'agent_message' and line_type = 'response_item' then p.content
        end as blocks,
        -- paginated threads and the newer kinds (§14.3, §14.4)
        try_cast(e.ordinal as bigint) as ordinal,
        case when line_type = 'session_meta' then {
            'history_mode': coalesce(p.history_mode, 'legacy'),
            'history_start': try_cast(p.subagent_history_start_ordinal as bigint),
            'parent_thread': coalesce(p.source ->> '$.subagent.thread_spawn.parent_thread_id', p.parent_thread_id),
        } end as meta_mode,
        -- the TurnItem's JSON: sql/batch/codex/codex_items.sql decodes those lines alone (formats/codex/converter.py)
        case when line_type = 'event_msg' and p.type = 'item_completed' then p.item end as item_json,
        -- thread_settings_applied's settings that turn_context's config changes have, thread_goal_updated's goal
        case when line_type = 'event_msg' and p.type = 'thread_settings_applied'
            then p.thread_settings.model end as settings_model,
        case when line_type = 'event_msg' and p.type = 'thread_settings_applied'
            then p.thread_settings.approval_policy end as settings_approval_policy,
        case when line_type = 'event_msg' and p.type = 'thread_settings_applied'
            then p.thread_settings.reasoning_effort end as settings_reasoning_effort,
        case when line_type = 'event_msg' and p.type = 'thread_settings_applied'
            then p.thread_settings.cwd end as settings_cwd,
        case when line_type = 'event_msg' and p.type = 'thread_goal_updated' then p.goal.objective end as goal_objective,
        case when line_type = 'event_msg' and p.type = 'thread_goal_updated' then p.goal.status end as goal_status,
        -- an inter-agent message (§14.4), an inter_agent_communication line or an agent_message item:
        -- its author and recipient (agent paths), its text: its content entries' texts (an agent_message
        -- item's entries are its blocks), or a content that is a string (read from the line, these lines alone)
        case when line_type = 'inter_agent_communication' or (line_type = 'response_item' and p.type = 'agent_message')
            then p.author end as message_author,
        case when line_type = 'inter_agent_communication' or (line_type = 'response_item' and p.type = 'agent_message')
            then p.recipient end as message_recipient,
        case when line_type = 'inter_agent_communication' or (line_type = 'response_item' and p.type = 'agent_message')
            then coalesce(
                array_to_string(list_filter(list_transform(p.content, lambda b: b.text), lambda x: x is not null), '\n'),
                json_extract_string(text, '$.payload.content'))
        end as message_text,
        -- token_count (§9): the five classic fields of the running total and of the last response
        try_cast(p.info.total_token_usage.input_tokens as bigint) as total_input,
        try_cast(p.info.total_token_usage.cached_input_tokens as bigint) as total_cached,
        try_cast(p.info.total_token_usage.output_tokens as bigint) as total_output,
        try_cast(p.info.total_token_usage.reasoning_output_tokens as bigint) as total_reasoning,
        try_cast(p.info.total_token_usage.total_tokens as bigint) as total_total,
        try_cast(p.info.last_token_usage.input_tokens as bigint) as last_input,
        try_cast(p.info.last_token_usage.cached_input_tokens as bigint) as last_cached,
        try_cast(p.info.last_token_usage.output_tokens as bigint) as last_output,
        try_cast(p.info.last_token_usage.reasoning_output_tokens as bigint) as last_reasoning,
        try_cast(p.info.last_token_usage.total_tokens as bigint) as last_total,
        try_cast(coalesce(p.info.last_token_usage.cache_write_input_tokens,
            p.info.last_token_usage.cache_creation_input_tokens) as bigint) as last_cache_write,
        case
            when not is_json then 'invalid_json'
            when not is_object then 'not_an_object'
        end as reason,
        case
            when not is_json then 'not valid JSON'
            when not is_object then 'a JSON value that is not an object'
        end as detail,
    from kinds
),

-- the outcome a tool output's text records (§5): the old shell output is a JSON document in the string
-- ({"output", "metadata": {"exit_code", "duration_seconds"}}), decoded a second time, that text
-- alone; newer outputs begin with header lines before "Output:" ("Exit code: N", "Wall time: X
-- seconds"; exec_command's "Process exited with code N", or "Process running with session ID N" while
-- the process outlives the call). Only the header is read: a command's own output may hold the same words.
outputs as (
    select
        *,
        case when payload_type in ('function_call_output', 'custom_tool_call_output')
                and starts_with(output_text, '{') and contains(output_text, '"metadata"')
            then try(json_transform(output_text,
                '{"metadata": {"exit_code": "VARCHAR", "duration_seconds": "VARCHAR"}}')).metadata
        end as output_meta,
        case when payload_type in ('function_call_output', 'custom_tool_call_output') then nullif(regexp_extract(
            left(output_text, 1024), '^((?:[A-Za-z][A-Za-z ]*: [^\n]*\n|Process [^\n]*\n)+)Output:', 1), '')
        end as output_header,
    from fields
),

outcomes as (
    select
        * exclude (output_meta, output_header),
        try_cast(output_meta.exit_code as bigint) as meta_exit_code,
        round(try_cast(output_meta.duration_seconds as double) * 1000) as meta_duration_ms,
        try_cast(coalesce(
            nullif(regexp_extract(output_header, '(?:^|\n)Exit code: (-?[0-9]+)\n', 1), ''),
            nullif(regexp_extract(output_header, '(?:^|\n)Process exited with code (-?[0-9]+)\n', 1), '')
        ) as bigint) as text_exit_code,
        round(try_cast(nullif(regexp_extract(output_header,
            '(?:^|\n)Wall time: ([0-9]+(?:\.[0-9]+)?) seconds\n', 1), '') as double) * 1000) as text_duration_ms,
        coalesce(regexp_matches(output_header, '(?:^|\n)Process running with session ID '), false) as still_running,
    from outputs
),

-- the file's own thread: its first session_meta (§3, §10), created at own_created_at
owned as (
    select
        *,
        first_value(case when line_type = 'session_meta' then meta_id end ignore nulls)
            over (partition by file_idx order by line rows between unbounded preceding and unbounded following)
            as own_thread,
        first_value(case when line_type = 'session_meta' then meta_created_at end ignore nulls)
            over (partition by file_idx order by line rows between unbounded preceding and unbounded following)
            as own_created_at,
        last_value(case when line_type = 'session_meta' then meta_id end ignore nulls)
            over (partition by file_idx order by line rows between unbounded preceding and current row) as latest_thread,
        -- the file's history mode and inherited-context cutoff (§14.3, §14.5): its first session_meta's
        first_value(meta_mode ignore nulls)
            over (partition by file_idx order by line rows between unbounded preceding and unbounded following)
            as own_mode,
    from outcomes
),

-- A fork or forked subagent file copies its parent's lines after a copy of the parent's session_meta
-- (reference §10, §14.5), then writes its own. The copy starts at the first session_meta of another
-- thread and ends where the file's own first turn starts: a turn_context or task_started whose turn_id
-- is a UUIDv7 taken at or after the file's thread was created (the parent's turns were all started
-- before). A file without such a turn (turn ids came after 0.98) has no known end: the copy runs to its
-- last line.
spans as (
    select
        file_idx,
        min(line) filter (where line_type = 'session_meta' and meta_id is distinct from own_thread) as copy_start,
    from owned
    group by file_idx
),

own_turns as (
    select o.file_idx, min(o.line) as copy_end
    from owned as o
    join spans as s using (file_idx)
    where o.line > s.copy_start
        and o.turn_id is not null
        and regexp_full_match(o.turn_id, '[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}')
        and to_timestamp(cast('0x' || substr(o.turn_id, 1, 8) || substr(o.turn_id, 10, 4) as bigint) / 1000) >= o.own_created_at
    group by o.file_idx
),

-- A paginated subagent file may hold context it inherited from its parent thread: its lines whose
-- ordinal is below its session_meta's subagent_history_start_ordinal (§14.5), its own session_meta
-- excepted. They are the parent's, as a fork's copy is.
inherited as (
    select
        * exclude (own_mode, meta_mode),
        coalesce(own_mode.history_mode = 'paginated', false) as is_paginated,
        coalesce(
            own_mode.history_mode = 'paginated' and ordinal < own_mode.history_start
                and not (line_type = 'session_meta' and meta_id is not distinct from own_thread),
            false
        ) as is_inherited,
        own_mode.parent_thread as own_parent_thread,
    from owned
),

-- the thread a line was written in: the file's own, or within the copy the latest session_meta's (the
-- parent's), so that a copied token_count has the parent's thread in both files; an inherited line's
-- is the parent thread the file's session_meta names
threaded as (
    select
        o.* exclude (latest_thread, own_created_at, meta_created_at, own_parent_thread),
        case
            when o.is_inherited and o.own_parent_thread is not null then o.own_parent_thread
            when o.line >= s.copy_start and o.line < coalesce(t.copy_end, o.line + 1) then o.latest_thread
            else o.own_thread
        end as thread,
    from inherited as o
    left join spans as s using (file_idx)
    left join own_turns as t using (file_idx)
),

-- §9.6: a response is one distinct (total_token_usage, last_token_usage) pair of the five classic
-- fields each, within its thread; its ID is derived from both, so that a copy in a fork or a
-- subagent file (or a re-emit) is the same inference wherever it is read, and two sessions whose
-- responses happen to have the same counts (the first response of two runs of one prompt) are not
keyed as (
    select
        *,
        case when line_type = 'event_msg' and payload_type = 'token_count'
                and total_input is not null and total_cached is not null and total_output is not null
                and total_reasoning is not null and total_total is not null and last_input is not null
                and last_cached is not null and last_output is not null and last_reasoning is not null
                and last_total is not null
            then concat_ws(',', coalesce(thread, ''), total_input, total_cached, total_output, total_reasoning,
                total_total, last_input, last_cached, last_output, last_reasoning, last_total)
        end as usage_key,
    from threaded
)

select
    * exclude (ordinal),  -- read for the inherited context above; the line keeps it (records.native)
    case when usage_key is not null then 'codex:usage:' || left(sha256(usage_key), 32) end as usage_id,
    -- placeholders (§9.3.4, §9.6): last input and output both 0 is not a response
    usage_key is not null and not (last_input = 0 and last_output = 0) as is_response,
from keyed
order by file_idx, line
