-- checkpoint_files: one row per (checkpoint record, tracked file); a snapshot that tracks no
-- file keeps one row with a null path, so every checkpoint record appears.
-- Registry entry, Workspace and VCS: file-history-snapshot -> checkpoint with kind snapshot and
-- files objects {path, version, blob}. snapshot.messageId is the user prompt's uuid (a
-- reference, not an ID: it can collide after resume); the top-level messageId of an update is
-- the line whose edit added a backup. file-history-delta lines are not named by the entry: they stay
-- records of kind unknown with their JSON, and give no row here (docs/asr-tables.md).
-- reads: records_full, session_uuids
with records as (
    select record_id, session_key, seq, native_type, native
    from records_full
    where native_type = 'file-history-snapshot'
),

-- each snapshot line is parsed once for all the fields read from it
snapshot_fields as (
    select
        record_id,
        session_key,
        seq,
        native_type,
        json_extract(native, [
            '$.snapshot', '$.snapshot.messageId', '$.messageId', '$.isSnapshotUpdate',
            '$.snapshot.trackedFileBackups', '$.snapshot.timestamp'
        ]) as fields,
    from records
    where native_type = 'file-history-snapshot'
),

snapshots as (
    select
        record_id,
        session_key,
        seq,
        native_type,
        fields[1] as snapshot,
        coalesce(fields[2] ->> '$', fields[3] ->> '$') as message_id,
        fields[3] ->> '$' as trigger_message_id,
        case when json_type(fields[4]) = 'BOOLEAN' then fields[4]::boolean end as is_snapshot_update,
        json_transform(fields[5], '"MAP(VARCHAR, JSON)"') as backups,
        fields[6] ->> '$' as snapshot_time,
    from snapshot_fields
),

snapshot_files as (
    select
        record_id,
        session_key,
        seq,
        native_type,
        message_id,
        trigger_message_id,
        is_snapshot_update,
        snapshot,
        snapshot_time,
        unnest(case when cardinality(backups) > 0 then map_keys(backups) else [null] end) as path,
        unnest(case when cardinality(backups) > 0 then map_values(backups) else [null] end) as backup,
        unnest(case when cardinality(backups) > 0 then range(cardinality(backups)::bigint) else [null] end) as file_index,
    from snapshots
),

snapshot_rows as (
    select
        record_id,
        session_key,
        seq,
        native_type,
        message_id,
        trigger_message_id,
        is_snapshot_update,
        file_index,
        path,
        backup,
        snapshot_time,
        coalesce(backup, snapshot) as native,
    from snapshot_files
),

rows_ as (
    select * from snapshot_rows
),

-- the record of each uuid the checkpoints name (the session's uuid map, session_uuids.sql)
uuids as (
    select session_key, uuid, record_id
    from session_uuids
    where uuid in (select message_id from rows_ union all select trigger_message_id from rows_)
),

final as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        'snapshot' as checkpoint_kind,
        r.native_type,
        r.message_id,
        m.record_id as message_record_id,
        r.trigger_message_id,
        t.record_id as trigger_record_id,
        r.is_snapshot_update,
        r.file_index,
        r.path,
        json_bigint(r.backup -> '$.version') as version,
        r.backup ->> 'backupFileName' as blob,
        try_cast(r.backup ->> 'backupTime' as timestamptz) as backup_at,
        try_cast(r.snapshot_time as timestamptz) as snapshot_at,
        r.native::json as native,
    from rows_ as r
    left join uuids as m on m.session_key = r.session_key and m.uuid = r.message_id
    left join uuids as t on t.session_key = r.session_key and t.uuid = r.trigger_message_id
)

select * from final
order by session_key, seq, file_index
