-- capability_changes: one row per MCP server that a deferred_tools_delta reports as failed or as
-- needing authentication, on change only.
-- Registry entry, Configuration: deferred_tools_delta … its failed and needs-auth MCP servers →
-- config_change.capability with op: fail or needs_auth. Repeated metadata: a repeated identical
-- value is not a change, so a server listed with the same op by the stream's previous delta that
-- carries server lists gets no row (an absent list counts as empty).
-- reads: records_full
with deltas as (
    select
        record_id,
        session_key,
        seq,
        position,
        timestamp,
        native -> '$.attachment' as a,
    from records_full
    where native_type = 'attachment' and native_subtype = 'deferred_tools_delta'
),

reporting as (
    select
        *,
        lag(record_id) over (partition by session_key order by seq) as previous_record_id,
    from deltas
    where json_type(a, '$.failedMcpServers') = 'ARRAY' or json_type(a, '$.needsAuthMcpServers') = 'ARRAY'
),

entries as (
    select
        record_id, session_key, seq, position, timestamp, previous_record_id,
        'fail' as op,
        unnest(json_extract(a, '$.failedMcpServers[*]')) as entry,
        unnest(range(json_array_length(a, '$.failedMcpServers')::bigint)) as entry_index,
    from reporting
    where json_type(a, '$.failedMcpServers') = 'ARRAY'
    union all
    select
        record_id, session_key, seq, position, timestamp, previous_record_id,
        'needs_auth' as op,
        unnest(json_extract(a, '$.needsAuthMcpServers[*]')) as entry,
        unnest(range(json_array_length(a, '$.needsAuthMcpServers')::bigint)) as entry_index,
    from reporting
    where json_type(a, '$.needsAuthMcpServers') = 'ARRAY'
),

decoded as (
    select
        *,
        case
            when json_type(entry) = 'VARCHAR' then entry ->> '$'
            else coalesce(entry ->> '$.name', entry ->> '$.server', entry ->> '$.serverName')
        end as server,
        entry ->> '$.errorCode' as error_code,
        entry ->> '$.error' as error,
    from entries
),

changes as (
    select d.*
    from decoded as d
    left join decoded as p
        on p.record_id = d.previous_record_id
        and p.server = d.server
        and p.op = d.op
    where p.record_id is null
),

final as (
    select
        record_id,
        session_key,
        server,
        op,
        error_code,
        error,
        position,
        timestamp as recorded_at,
        entry::varchar as native,
        seq,
        entry_index,
    from changes
)

select * exclude (seq, entry_index) from final
order by session_key, seq, op, entry_index
