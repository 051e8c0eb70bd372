-- record_table: one narrow row per record, with what relates it to the other records of its session:
-- its first-seen and latest live observation (by ord), seq, turn, the parent, logical parent and
-- copied records, whether it is the launch prompt of a subagent stream, whether a queue operation
-- withdrew it, and its MCP attribution. records_full.sql joins it and takes every other attribute
-- of a record from its first-seen and latest observation.
-- It reads narrow columns alone, no JSON text, content, toolUseResult or text head: the values it
-- needs from them (toolUseResult.agentId and the call IDs of the result's blocks, the uuid of the
-- message an agent_progress line copies, a queue operation's content and reason) were taken where
-- each line was decoded (observations.sql).
-- reads: batch_files, classified, observation_index
with live as (
    select
        i.ord,
        i.record_id,
        i.uuid_first_ord,
        i.record_first_ord,
        c.session_key,
        c.file_idx,
        c.kind,
        c.native_type,
        c.native_subtype,
        c.uuid,
        c.parent_uuid,
        c.logical_parent_uuid,
        c.prompt_id,
        c.progress_agent_id,
        c.progress_copy_uuid,
        c.result_agent_id,
        c.result_call_ids,
        c.queue_content,
        c.queue_reason,
        c.attribution_mcp_server,
        c.attribution_mcp_tool,
    from observation_index as i
    join classified as c using (ord)
    where i.is_live
),

-- the first-seen and the latest observation of each record
record_ends as (
    select
        record_id,
        arg_min(ord, (uuid_first_ord, ord)) as first_ord,
        max(ord) as last_ord,
    from live
    group by record_id
),

first_obs as (
    select o.*, e.first_ord, e.last_ord
    from live as o
    join record_ends as e on o.ord = e.first_ord
),

uuid_map as (
    select session_key, uuid, record_id
    from live
    where uuid is not null
),

-- Subagent streams whose launch prompt the registry entry identifies: "by the sidecar toolUseId and
-- the parent result's agentId", both naming the same call. Their first prompt was written by the
-- parent agent. With only one of the two (every sidecar before 2.1.2xx lacks toolUseId) the sender
-- is not identified: the first record alone does not identify it, so its author stays null.
sidecar_calls as (
    select session_key, json_extract_string(sidecar, '$.toolUseId') as call_id
    from batch_files
    where stream_kind = 'subagent' and json_extract_string(sidecar, '$.toolUseId') is not null
),

result_calls as (
    select
        coalesce(f.parent_session_id, f.session_id) || '/' || o.result_agent_id as session_key,
        o.result_call_ids as call_ids,
    from live as o
    join batch_files as f using (file_idx)
    where o.result_agent_id is not null
),

launched as (
    select distinct s.session_key
    from sidecar_calls as s
    join result_calls as r on r.session_key = s.session_key and list_contains(r.call_ids, s.call_id)
),

launch_prompts as (
    select session_key, min(uuid_first_ord) as launch_ord
    from first_obs
    where native_type = 'user' and kind = 'message'
        and session_key in (select session_key from launched)
    group by session_key
),

-- agent_progress lines embed a subagent's own messages: each is linked to the subagent record
-- it copies (from its transcript file, or rebuilt from these copies when the file is absent)
progress_copies as (
    select
        f.record_id,
        coalesce(bf.parent_session_id, bf.session_id) || '/' || f.progress_agent_id as child_session_key,
        f.progress_copy_uuid as copy_uuid,
    from first_obs as f
    join batch_files as bf using (file_idx)
    where f.native_subtype = 'agent_progress' and f.progress_agent_id is not null
),

-- MCP attribution may be on any line of a response
attribution as (
    select
        record_id,
        max(attribution_mcp_server) as attribution_mcp_server,
        max(attribution_mcp_tool) as attribution_mcp_tool,
    from live
    where attribution_mcp_server is not null or attribution_mcp_tool is not null
    group by record_id
),

-- queue-operation remove: the queued message it pulls back is withdrawn (registry entry, Notes):
-- the latest earlier enqueue of the stream with the same content (any, when remove has none).
-- A remove with reason absorbed_mid_turn is not a withdrawal: the message was delivered mid-turn
-- (a queued_command attachment follows it). The operation is the first observation's, the content
-- and reason the latest's.
queue_ops as (
    select
        f.record_id, f.session_key, f.record_first_ord, f.native_subtype as operation,
        l.queue_content as content, l.queue_reason as reason,
    from first_obs as f
    join live as l on l.ord = f.last_ord
    where f.native_type = 'queue-operation'
),

withdrawn as (
    select arg_max(e.record_id, e.record_first_ord) as record_id
    from queue_ops as r
    join queue_ops as e
        on e.session_key = r.session_key
        and e.operation = 'enqueue'
        and e.record_first_ord < r.record_first_ord
        and (r.content is null or e.content = r.content)
    where r.operation = 'remove' and r.reason is distinct from 'absorbed_mid_turn'
    group by r.record_id
),

final as (
    select
        f.record_id,
        f.session_key,
        f.first_ord,
        f.last_ord,
        f.record_first_ord,
        row_number() over (partition by f.session_key order by f.record_first_ord) as seq,
        last_value(f.prompt_id ignore nulls) over (
            partition by f.session_key order by f.record_first_ord
            rows between unbounded preceding and current row
        ) as turn_id,
        p.record_id as parent_record_id,
        lpu.record_id as logical_parent_record_id,
        cp.record_id as copy_of_record_id,
        lp.launch_ord is not null as is_launch_prompt,
        case when f.record_id in (select record_id from withdrawn) then 'withdrawn' end as status,
        att.attribution_mcp_server,
        att.attribution_mcp_tool,
    from first_obs as f
    left join uuid_map as p on p.session_key = f.session_key and p.uuid = f.parent_uuid
    left join uuid_map as lpu on lpu.session_key = f.session_key and lpu.uuid = f.logical_parent_uuid
    left join launch_prompts as lp on lp.session_key = f.session_key and lp.launch_ord = f.uuid_first_ord
    left join attribution as att on att.record_id = f.record_id
    left join progress_copies as pc on pc.record_id = f.record_id
    left join uuid_map as cp on cp.session_key = pc.child_session_key and cp.uuid = pc.copy_uuid
)

select * from final
