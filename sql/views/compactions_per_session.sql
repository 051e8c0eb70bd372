-- compactions_per_session: one row per stream (session_key, every stream of sessions): how many
-- times its context was compacted, by kind.
-- reads: compactions, sessions
-- full: the prefix was replaced by a summary; micro: tool results were cleared; prune: a
-- server-side context edit. A stream without compactions has zeros.
with streams as (
    select session_key, stream_kind from sessions
),

compactions as (
    select * from compactions
),

counted as (
    select
        session_key,
        count(*) filter (where compaction_kind = 'full') as full_compactions,
        count(*) filter (where compaction_kind = 'micro') as micro_compactions,
        count(*) filter (where compaction_kind = 'prune') as prunes,
        count(*) filter (where compaction_kind = 'full' and trigger = 'auto') as auto_full_compactions,
        max(pre_tokens) filter (where compaction_kind = 'full') as max_pre_tokens,
        min(recorded_at) as first_compaction_at,
    from compactions
    group by session_key
),

final as (
    select
        s.session_key,
        s.stream_kind,
        coalesce(c.full_compactions, 0) as full_compactions,
        coalesce(c.micro_compactions, 0) as micro_compactions,
        coalesce(c.prunes, 0) as prunes,
        coalesce(c.full_compactions + c.micro_compactions + c.prunes, 0) as compactions,
        coalesce(c.auto_full_compactions, 0) as auto_full_compactions,
        c.max_pre_tokens,
        c.first_compaction_at,
    from streams as s
    left join counted as c using (session_key)
)

select * from final
order by compactions desc, session_key
