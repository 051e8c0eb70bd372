-- vcs_events: one row per version-control fact: each component of a gitOperation on a tool
-- result, and each distinct pr-link of a stream.
-- Registry entry, Workspace and VCS: gitOperation on a Bash result -> vcs with evidence
-- parsed_output; pr.action created, edited, merged, commented, closed, reopened, ready, draft ->
-- pr_open, pr_update, pr_merge, pr_comment, pr_close, pr_reopen, pr_ready, pr_draft.
-- pr-link -> vcs pr_link with evidence reported. pr-link lines are re-written at each exit
-- (registry "Repeated metadata": a repeated identical value is not a change), so one row per
-- distinct link of a stream, at its first record, counting every line that repeats it (a record
-- may already fold several unchanged lines: records_full.observation_count).
-- toolUseResult is re-serialized JSON, so a result with a gitOperation key contains the key's
-- name verbatim: only those few records are decoded
-- reads: call_pairs, records_full, result_calls
with git_records as (
    select record_id, session_key, seq, timestamp, tool_use_result -> '$.gitOperation' as git_operation,
    from records_full
    where contains(tool_use_result, '"gitOperation"')
        and json_type(tool_use_result, '$.gitOperation') = 'OBJECT'
),

git_operations as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        r.timestamp,
        p.call_id,
        c.tool_name,
        json_transform(r.git_operation, '"MAP(VARCHAR, JSON)"') as components,
    from git_records as r
    left join result_calls as p using (record_id)
    left join call_pairs as c on c.session_key = r.session_key and c.call_id = p.call_id
),

components as (
    select
        record_id,
        session_key,
        seq,
        timestamp,
        call_id,
        tool_name,
        unnest(map_keys(components)) as component,
        unnest(map_values(components)) as obj,
        unnest(range(cardinality(components)::bigint)) as component_index,
    from git_operations
),

git_facts as (
    select
        record_id,
        session_key,
        call_id,
        seq,
        case component
            when 'commit' then 'commit'
            when 'push' then 'push'
            when 'branch' then 'branch'
            when 'pr' then case obj ->> 'action'
                when 'created' then 'pr_open'
                when 'edited' then 'pr_update'
                when 'merged' then 'pr_merge'
                when 'commented' then 'pr_comment'
                when 'closed' then 'pr_close'
                when 'reopened' then 'pr_reopen'
                when 'ready' then 'pr_ready'
                when 'draft' then 'pr_draft'
            end
        end as action,
        'parsed_output' as evidence,
        'gitOperation.' || component as native_field,
        case component
            when 'commit' then obj ->> 'kind'
            when 'branch' then obj ->> 'action'
            when 'pr' then obj ->> 'action'
        end as native_action,
        tool_name,
        case when component = 'pr' then
            nullif(regexp_extract(obj ->> 'url', '^[a-z]+://[^/]+/([^/]+/[^/]+)/pull/[0-9]+', 1), '')
        end as repository,
        case component
            when 'commit' then obj ->> 'branch'
            when 'push' then obj ->> 'branch'
            when 'branch' then obj ->> 'ref'
        end as branch,
        case when component = 'commit' then obj ->> 'sha' end as commit_id,
        case when component = 'pr' then try_cast(obj ->> 'number' as bigint) end as pr_number,
        case when component = 'pr' then obj ->> 'url' end as pr_url,
        timestamp as occurred_at,
        1::bigint as observation_count,
        obj as native,
        component_index as fact_index,
    from components
),

pr_links as (
    select
        record_id,
        session_key,
        seq,
        timestamp,
        native,
        observation_count as line_count,
        native ->> 'prRepository' as repository,
        try_cast(native ->> 'prNumber' as bigint) as pr_number,
        native ->> 'prUrl' as pr_url,
    from records_full
    where native_type = 'pr-link'
),

distinct_links as (
    select
        *,
        sum(line_count) over (partition by session_key, repository, pr_number, pr_url) as observation_count,
    from pr_links
    qualify row_number() over (partition by session_key, repository, pr_number, pr_url order by seq) = 1
),

link_facts as (
    select
        record_id,
        session_key,
        null::varchar as call_id,
        seq,
        'pr_link' as action,
        'reported' as evidence,
        'pr-link' as native_field,
        null::varchar as native_action,
        null::varchar as tool_name,
        repository,
        null::varchar as branch,
        null::varchar as commit_id,
        pr_number,
        pr_url,
        timestamp as occurred_at,
        observation_count::bigint as observation_count,
        native::json as native,
        0::bigint as fact_index,
    from distinct_links
),

final as (
    select * from git_facts
    union all
    select * from link_facts
)

select * exclude (fact_index) from final
order by session_key, seq, fact_index
