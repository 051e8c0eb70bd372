-- codex_items: one row per item_completed line of a Codex rollout batch, its TurnItem decoded
-- (codex_turn_item_shape(), reference §14.3). sql/batch/codex/codex_lines.sql keeps each such line's item as
-- JSON (`item_json`); formats/codex/converter.py hands those rows alone here, so that the struct of the
-- item's fields is built for them, not for every line.
-- reads: codex_item_lines
with final as (
    select file_idx, line, json_transform(item_json, codex_turn_item_shape()) as item,
    from codex_item_lines
)

select * from final
