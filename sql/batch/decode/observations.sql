-- observations: one row per text read (a line, or an object recovered from a line).
-- Decodes the envelope once per text, and that one parse also says whether the text is one JSON
-- object (is_object): text that is not valid JSON (the decode fails: TRY makes it null, where
-- json_valid is false) or another JSON value (its first character is not `{`) is not, and the
-- pipeline drops its row and sends the text to recovery (transforms/recover.py). The test is in
-- the result, not in a WHERE: a filter on the decode would be pushed below it and parse every
-- text twice. Polymorphic fields (message.content, toolUseResult,
-- attachment, data, content) stay JSON text. A field whose JSON type differs from the one
-- declared here decodes as null; the object itself is kept verbatim in `json`.
-- json_hash is a hash of the text (see below), so that no later step reads the text to compare two lines.
-- Token counts are read as JSON and kept only when they are JSON integers that fit a BIGINT:
-- a cast would round 1.5 to 2, read "12" or true as a number, and make 1e30 null silently. A count
-- present in any other form is null here and listed in number_faults ("<field>=<JSON>"), which
-- number_faults.sql turns into a declared loss naming field and position.
-- reads: batch_files, batch_objects
-- result: large, concurrent
-- (it runs while another batch holds the large statements, docs/decisions/002-two-batches.md)
with objects as (
    select * from batch_objects
),

files as (
    select * from batch_files
),

decoded as (
    select
        o.obj_idx,
        o.file_idx,
        o.line,
        o.sub,
        try(json_transform(o.json, '{
            "type": "VARCHAR", "subtype": "VARCHAR", "uuid": "VARCHAR", "parentUuid": "VARCHAR",
            "logicalParentUuid": "VARCHAR", "sessionId": "VARCHAR", "agentId": "VARCHAR",
            "timestamp": "VARCHAR", "cwd": "VARCHAR", "version": "VARCHAR", "gitBranch": "VARCHAR",
            "isSidechain": "BOOLEAN", "isMeta": "BOOLEAN", "isCompactSummary": "BOOLEAN",
            "isApiErrorMessage": "BOOLEAN", "requestId": "VARCHAR", "promptId": "VARCHAR",
            "operation": "VARCHAR", "leafUuid": "VARCHAR", "summary": "VARCHAR",
            "customTitle": "VARCHAR", "aiTitle": "VARCHAR", "toolUseID": "VARCHAR",
            "parentToolUseID": "VARCHAR", "content": "JSON", "toolUseResult": "JSON",
            "attachment": {"type": "VARCHAR", "origin": {"kind": "VARCHAR"}},
            "data": {"type": "VARCHAR", "agentId": "VARCHAR", "message": {"uuid": "VARCHAR"}},
            "reason": "VARCHAR",
            "origin": {"kind": "VARCHAR", "subkind": "VARCHAR", "fromSession": "VARCHAR", "from": "VARCHAR", "name": "VARCHAR"},
            "turnOrigin": "VARCHAR", "promptSource": "VARCHAR", "scheduledTaskId": "VARCHAR",
            "scheduledFireId": "VARCHAR", "fireReason": "VARCHAR", "permissionMode": "VARCHAR",
            "entrypoint": "VARCHAR", "toolDenialKind": "VARCHAR",
            "permissionDecision": {"decision": "VARCHAR", "source": "VARCHAR", "reasonType": "VARCHAR"},
            "attributionMcpServer": "VARCHAR", "attributionMcpTool": "VARCHAR",
            "forkedFrom": {"sessionId": "VARCHAR", "messageUuid": "VARCHAR"},
            "message": {
                "id": "VARCHAR", "role": "VARCHAR", "model": "VARCHAR", "stop_reason": "VARCHAR",
                "content": "JSON",
                "usage": "JSON"
            }
        }')) as e,
        starts_with(ltrim(o.json, ' ' || chr(9) || chr(13)), '{') as is_brace,
        o.json,
    from objects as o
),

-- one parse of message.content: a string's value, or an array's blocks with the fields read below
-- (the first block's type and text, the tool blocks' keys)
headed as (
    select
        *,
        case when left(e.message.content, 1) = '"' then json_extract_string(e.message.content, '$') end as content_string,
        case when left(e.message.content, 1) = '[' then json_transform(e.message.content, '[{
            "type": "VARCHAR", "text": "VARCHAR", "id": "VARCHAR", "tool_use_id": "VARCHAR", "name": "VARCHAR"
        }]') end as content_blocks,
        json_extract(e.message.usage, [
            '$.input_tokens', '$.output_tokens', '$.cache_creation_input_tokens', '$.cache_read_input_tokens',
            '$.cache_creation.ephemeral_5m_input_tokens', '$.cache_creation.ephemeral_1h_input_tokens'
        ]) as usage_json,
        e.message.usage ->> '$.service_tier' as usage_service_tier,
    from decoded
),

-- the text of the line's first block as parts.sql reads it (shell_head): a thinking or tool_result
-- block's is parsed only when the content holds `<bash-` (the JSON value of the content is written
-- by DuckDB, so with no escape in that text)
headed_text as (
    select
        *,
        case
            when left(e.message.content, 1) = '[' then case content_blocks[1].type
                when 'text' then content_blocks[1].text
                when 'thinking' then case when contains(e.message.content, '<bash-')
                    then json_extract_string(e.message.content, '$[0].thinking') end
                when 'tool_result' then case when contains(e.message.content, '<bash-') then
                    case json_type(e.message.content, '$[0].content')
                        when 'VARCHAR' then json_extract_string(e.message.content, '$[0].content')
                        when 'ARRAY' then array_to_string(json_extract_string(e.message.content, '$[0].content[*].text'), chr(10))
                    end end
            end
            when left(e.message.content, 1) = '"' then content_string
            when e.message.content is null and e.type = 'system' and json_type(e.content) = 'VARCHAR'
                then json_extract_string(e.content, '$')
            when e.type = 'attachment' and coalesce(e.subtype, e.attachment.type, e.data.type, e.operation) = 'hook_additional_context'
                then json_extract_string(json, '$.attachment.content[0]')
        end as first_text,
    from headed
),

-- a count is an integer that fits: JSON integers only, never a cast from a float, a string or a boolean
counted as (
    select
        *,
        list_transform(
            usage_json,
            lambda v: json_bigint(v)
        ) as usage_counts,
    from headed_text
),

final as (
    select
        d.file_idx,
        d.line,
        d.sub,
        f.file_rank,
        f.source_file,
        f.session_key,
        f.stream_kind,
        f.position_prefix || 'line:' || d.line || coalesce('#' || d.sub, '') as position,
        f.record_source,
        e.type as native_type,
        coalesce(e.subtype, e.attachment.type, e.data.type, e.operation) as native_subtype,
        e.uuid,
        e.parentUuid as parent_uuid,
        e.logicalParentUuid as logical_parent_uuid,
        e.sessionId as native_session_id,
        e.agentId as native_agent_id,
        try_cast(e.timestamp as timestamptz) as timestamp,
        e.cwd,
        e.version,
        e.gitBranch as git_branch,
        e.isSidechain as is_sidechain,
        e.isMeta as is_meta,
        e.isCompactSummary as is_compact_summary,
        e.isApiErrorMessage as is_api_error,
        e.requestId as request_id,
        e.promptId as prompt_id,
        e.leafUuid as leaf_uuid,
        e.summary,
        e.customTitle as custom_title,
        e.aiTitle as ai_title,
        e.toolUseID as tool_use_id,
        e.parentToolUseID as parent_tool_use_id,
        coalesce(e.origin.kind, e.attachment.origin.kind) as origin_kind,
        e.origin.subkind as origin_subkind,
        e.origin.fromSession as origin_from_session,
        e.origin."from" as origin_from,
        e.origin.name as origin_name,
        e.turnOrigin as turn_origin,
        e.promptSource as prompt_source,
        e.scheduledTaskId as scheduled_task_id,
        e.scheduledFireId as scheduled_fire_id,
        e.fireReason as fire_reason,
        e.permissionMode as permission_mode,
        e.entrypoint,
        e.toolDenialKind as tool_denial_kind,
        e.permissionDecision.decision as permission_decision,
        e.permissionDecision.source as permission_source,
        e.permissionDecision.reasonType as permission_reason_type,
        e.attributionMcpServer as attribution_mcp_server,
        e.attributionMcpTool as attribution_mcp_tool,
        e.forkedFrom.sessionId as forked_from_session_id,
        e.forkedFrom.messageUuid as forked_from_uuid,
        e.data.agentId as progress_agent_id,
        -- narrow values that relate records across a session (record_table.sql), taken here so that
        -- no later step reads the text for them: the subagent message an agent_progress line copies,
        -- the agentId a tool result names with the call IDs of its blocks, and a queue operation's
        -- content (verbatim JSON: compared for equality; these lines are few and small) and reason
        e.data.message.uuid as progress_copy_uuid,
        case when contains(e.toolUseResult, 'agentId') then json_extract_string(e.toolUseResult, '$.agentId') end
            as result_agent_id,
        case when contains(e.toolUseResult, 'agentId') and json_extract_string(e.toolUseResult, '$.agentId') is not null
            then json_extract_string(e.message.content, '$[*].tool_use_id')
        end as result_call_ids,
        case when e.type = 'queue-operation' then d.json->'$.content' end as queue_content,
        case when e.type = 'queue-operation' then e.reason end as queue_reason,
        -- the keys of the tool blocks of message.content (tool_use, tool_result; decoded as parts.sql
        -- decodes a block), with their index in the array: call_pairs.sql pairs the calls and results
        -- of a session from them. A content without the text `tool_use` (a substring of both types,
        -- and of tool_use_id; the JSON value is written by DuckDB, with no escape in these names)
        -- holds none.
        case when left(e.message.content, 1) = '[' and contains(e.message.content, 'tool_use') then list_filter(
            list_transform(
                d.content_blocks,
                lambda b, i: {'block_index': (i - 1)::integer, 'type': b.type, 'call_id': coalesce(b.id, b.tool_use_id), 'tool_name': b.name}
            ),
            lambda b: b.type in ('tool_use', 'tool_result') and b.call_id is not null
        ) end as tool_blocks,
        -- whether the line has a block that parts.sql makes a part of text (other than attachment data),
        -- and whether the text of its first one starts a user's shell command (`<bash-input>`) or its
        -- output (`<bash-stdout>`, `<bash-stderr>`), as tool_calls.sql tests a record's first part:
        -- call_pairs.sql pairs them without reading the text
        case
            when left(e.message.content, 1) = '[' then e.message.content <> '[]'
            when left(e.message.content, 1) = '"' then true
            when e.message.content is null and e.type = 'system' and json_type(e.content) = 'VARCHAR' then true
            when e.type = 'attachment' and coalesce(e.subtype, e.attachment.type, e.data.type, e.operation) = 'hook_additional_context'
                and json_type(d.json->'$.attachment.content') = 'ARRAY'
                then json_array_length(d.json->'$.attachment.content') > 0
            else false
        end as has_blocks,
        case
            when starts_with(ltrim(d.first_text), '<bash-input>') then 'input'
            when regexp_matches(ltrim(d.first_text), '^<bash-std(out|err)>') then 'output'
        end as shell_head,
        e.content as top_content,
        e.toolUseResult as tool_use_result,
        e.message.id as message_id,
        e.message.role as message_role,
        e.message.model as model,
        e.message.stop_reason as stop_reason,
        e.message.content as content,
        -- content is JSON as DuckDB writes it (no leading space): its first character is its type
        case left(e.message.content, 1) when '[' then 'ARRAY' when '"' then 'VARCHAR' when '{' then 'OBJECT' end
            as content_type,
        d.content_blocks[1].type as first_block_type,
        left(case when left(e.message.content, 1) = '"' then d.content_string else d.content_blocks[1].text end, 256)
            as text_head,
        d.usage_counts[1] as input_tokens,
        d.usage_counts[2] as output_tokens,
        d.usage_counts[3] as cache_creation_input_tokens,
        d.usage_counts[4] as cache_read_input_tokens,
        d.usage_counts[5] as cache_creation_5m,
        d.usage_counts[6] as cache_creation_1h,
        d.usage_service_tier as service_tier,
        json_type(e.message.usage) = 'OBJECT' as has_usage,
        list_filter(
            list_transform(
                range(1, 7),
                lambda i: case when json_type(d.usage_json[i]) <> 'NULL' and d.usage_counts[i] is null then
                    [
                        'message.usage.input_tokens', 'message.usage.output_tokens',
                        'message.usage.cache_creation_input_tokens', 'message.usage.cache_read_input_tokens',
                        'message.usage.cache_creation.ephemeral_5m_input_tokens',
                        'message.usage.cache_creation.ephemeral_1h_input_tokens'
                    ][i] || '=' || d.usage_json[i]::varchar
                end
            ),
            lambda f: f is not null
        ) as number_faults,
        -- the value of the object, hashed here where its text is read (observation_index.sql compares
        -- it to tell the versions of a uuid and the changes of repeated metadata apart); for
        -- repeated metadata, without the fields that change at every write. A VARCHAR: as JSON, every
        -- text would be parsed again to be cast (the cast keeps the text: the same hash).
        hash(case
            when repeatable_metadata(e.uuid, e.type)
                then json_merge_patch(d.json, '{"timestamp": null, "uuid": null, "sessionId": null, "session_id": null}')::varchar
            else d.json
        end) as json_hash,
        d.obj_idx,
        d.json,
        d.e is not null and d.is_brace as is_object,
    from counted as d
    join files as f using (file_idx)
)

select * from final
