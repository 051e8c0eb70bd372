-- hook_failures: one row per (hook event, command): executions and how many failed.
-- reads: hooks
-- materialized: table
-- One execution can be reported several times (a start line, its outcome, a stop summary):
-- rows of hooks sharing execution_key are one execution. Its outcome is the worst status
-- reported: failed (error, non_blocking_error, or cancelled), else blocked (the hook blocked the
-- action on purpose), else succeeded (success, async_response), else unknown (only started or
-- summarized reports). failure_rate is over the executions with a known outcome.
with reports as (
    select * from hooks
),

executions as (
    select
        execution_key,
        any_value(event) as event,
        coalesce(any_value(command), '') as command,
        bool_or(status in ('error', 'non_blocking_error', 'cancelled')) as has_failed,
        bool_or(status = 'blocked') as has_blocked,
        bool_or(status in ('success', 'async_response')) as has_succeeded,
        bool_or(is_timed_out) as is_timed_out,
    from reports
    group by execution_key
),

outcomes as (
    select
        *,
        case
            when has_failed then 'failed'
            when has_blocked then 'blocked'
            when has_succeeded then 'succeeded'
            else 'unknown'
        end as outcome,
    from executions
),

final as (
    select
        event,
        command,
        count(*) as executions,
        count(*) filter (where outcome = 'failed') as failed,
        count(*) filter (where outcome = 'blocked') as blocked,
        count(*) filter (where outcome = 'succeeded') as succeeded,
        count(*) filter (where outcome = 'unknown') as unknown_outcome,
        count(*) filter (where is_timed_out) as timed_out,
        count(*) filter (where outcome = 'failed')
            / nullif(count(*) filter (where outcome <> 'unknown'), 0) as failure_rate,
    from outcomes
    group by event, command
)

select * from final
order by failed desc, executions desc, event, command
