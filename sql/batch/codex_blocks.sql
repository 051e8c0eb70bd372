-- codex_blocks: one row per content block of a Codex message item (`content[]`) and per summary
-- entry of a reasoning item (`summary[]`): the parts of their records (formats/codex).
-- reads: codex_input
with items as (
    select
        file_idx, line,
        case when json_type(text, '$.payload') = 'OBJECT' then text -> '$.payload' else text end as payload,
        case when json_type(text, '$.payload') = 'OBJECT' then '$.payload' else '$' end as root,
    from codex_input
    where json_valid(text) and json_type(text) = 'OBJECT'
),

arrays as (
    select
        file_idx, line, root,
        payload->>'$.type' as item_type,
        case payload->>'$.type' when 'message' then 'content' when 'reasoning' then 'summary' end as field,
        payload,
    from items
    where payload->>'$.type' in ('message', 'reasoning')
),

listed as (
    select
        file_idx, line, root, item_type, field,
        json_extract(payload, '$.' || field) as blocks,
    from arrays
    where json_type(payload, '$.' || field) = 'ARRAY'
),

blocks as (
    select
        file_idx, line, root, item_type, field,
        unnest(range(cast(json_array_length(blocks) as bigint))) as block_index,
        unnest(json_extract(blocks, '$[*]')) as block,
    from listed
)

select
    file_idx,
    line,
    cast(block_index as bigint) as block_index,
    item_type,
    block->>'$.type' as block_type,
    block->>'$.text' as text,
    block->>'$.image_url' as image_url,
    root || '.' || field || '[' || block_index || ']' as native_path,
from blocks
order by file_idx, line, block_index
