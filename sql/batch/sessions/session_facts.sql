-- session_facts: one row per session of the batch with a fact that a statement converting a part of
-- its records needs from the whole session, from narrow columns alone:
-- the seq of its last cost-state record (usage_summaries.sql, is_latest).
-- reads: classified, record_table
with final as (
    select r.session_key, max(r.seq) as last_cost_state_seq
    from record_table as r
    join classified as c on c.ord = r.first_ord
    where c.native_type = 'cost-state'
    group by r.session_key
)

select * from final
