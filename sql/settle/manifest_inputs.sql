-- manifest_inputs: one row per entry of the manifest's `inputs` (a file a batch read), in the order
-- the manifest lists them: by path, then in the order the run took their batches (a stable sort).
-- The entry's JSON text is kept as the batch wrote it; the columns are what the manifest says of
-- the entries together (bytes read, foreign files, the versions each format names).
-- reads: input_entries
-- order: path, entry_number
select
    text,
    json_extract_string(text, '$.path') as path,
    entry_number,
    cast(json_extract(text, '$.size') as bigint) as size,
    coalesce(json_extract_string(text, '$.status') = 'foreign', false) as is_foreign,
    coalesce(json_extract_string(text, '$.format') = $codex_format, false) as is_codex,
    cast(json_extract(text, '$.versions') as varchar[]) as versions,
from input_entries
