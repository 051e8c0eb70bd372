-- request_contexts: one row per api-request record.
-- Registry entry, Request context: each api-request record describes the request of the call whose
-- message.id its requestRef maps to: base (the earlier request) → prefixFrom.inferenceId (the
-- message.id of the base request's response), keep → prefixFrom.count, tail → entries as blobs
-- holding the messages from api-request-blob, params → inference.params. The unit is one message.
-- requestDigest goes in requestDigest only when it is a SHA-256 of the request bytes. A value shaped
-- like a SHA-256 does not show what was hashed, and no record holds the request bytes to check it
-- against: the value is kept as recorded (request_digest_native), request_digest stays null.
-- No real api-request line is in the corpus: fields read are id, requestRef, base, keep, tail
-- (blob hashes, or {hash} objects), params, querySource, shapeHash and requestDigest.
-- the request lines, their blobs and the responses they may name; the JSON text is kept
-- for the request and blob lines only
-- reads: records_full
with records as (
    select
        record_id, session_key, seq, position, timestamp, native_type, native_session_id, request_id, message_id,
        inference_id,
        case when native_type in ('api-request', 'api-request-blob') then native end as native,
    from records_full
    where native_type in ('api-request', 'api-request-blob', 'assistant')
),

requests as (
    select
        record_id,
        session_key,
        seq,
        position,
        timestamp,
        native,
        coalesce(native_session_id, split_part(session_key, '/', 1)) as native_session_id,
        native ->> '$.id' as api_request_id,
        coalesce(native ->> '$.requestRef', native ->> '$.id') as request_ref,
        native ->> '$.base' as base_ref,
        json_bigint(native -> '$.keep') as prefix_count,
        native -> '$.params' as params,
        native ->> '$.querySource' as query_source,
        native ->> '$.shapeHash' as shape_hash,
        native ->> '$.requestDigest' as digest_native,
    from records
    where native_type = 'api-request'
),

blobs as (
    select
        coalesce(native_session_id, split_part(session_key, '/', 1)) as native_session_id,
        session_key,
        native ->> '$.hash' as hash,
        native -> '$.message' as message,
        seq,
    from records
    where native_type = 'api-request-blob' and native ->> '$.hash' is not null
),

-- The response a reference names: an assistant response whose requestId or message.id equals it
-- (searched in the streams that hold requests only).
responses as (
    select distinct
        session_key,
        request_id as ref,
        message_id as inference_id,
    from records
    where native_type = 'assistant' and inference_id is not null and request_id is not null
        and session_key in (select session_key from requests)
    union
    select distinct
        session_key,
        message_id as ref,
        message_id as inference_id,
    from records
    where native_type = 'assistant' and inference_id is not null
        and session_key in (select session_key from requests)
),

resolved as (
    select
        q.*,
        r.inference_id,
    from requests as q
    left join responses as r
        on r.session_key = q.session_key and r.ref = q.request_ref
    qualify row_number() over (partition by q.record_id order by r.inference_id) = 1
),

-- The base names an earlier api-request (by id or requestRef), else a response directly.
with_prefix as (
    select
        q.*,
        coalesce(b.inference_id, r.inference_id) as prefix_inference_id,
    from resolved as q
    left join resolved as b
        on b.session_key = q.session_key
        and b.record_id <> q.record_id
        and q.base_ref in (b.api_request_id, b.request_ref)
    left join responses as r
        on r.session_key = q.session_key and r.ref = q.base_ref
    qualify row_number() over (
        partition by q.record_id order by b.seq, b.inference_id, r.inference_id
    ) = 1
),

tail_items as (
    select
        record_id,
        native_session_id,
        session_key,
        unnest(json_extract(native, '$.tail[*]')) as item,
        unnest(range(json_array_length(native, '$.tail')::bigint)) as tail_index,
    from requests
    where json_type(native, '$.tail') = 'ARRAY'
),

tail_hashes as (
    select
        *,
        case when json_type(item) = 'VARCHAR' then item ->> '$' else item ->> '$.hash' end as hash,
    from tail_items
),

-- A blob of the same stream first, else of the same native session (a subagent may share them).
tail_blobs as (
    select
        t.record_id,
        t.tail_index,
        t.hash,
        b.message,
    from tail_hashes as t
    left join blobs as b
        on b.hash = t.hash and b.native_session_id = t.native_session_id
    qualify row_number() over (
        partition by t.record_id, t.tail_index
        order by (b.session_key = t.session_key) desc nulls last, b.seq
    ) = 1
),

tails as (
    select
        record_id,
        list(hash order by tail_index) as tail_hashes,
        to_json(list({'hash': hash, 'message': message} order by tail_index)) as tail_entries,
        count(*) filter (where message is null)::bigint as unresolved_tail_count,
    from tail_blobs
    group by record_id
),

final as (
    select
        q.record_id,
        q.session_key,
        q.api_request_id,
        q.request_ref,
        q.inference_id,
        q.base_ref,
        q.prefix_inference_id,
        q.prefix_count,
        t.tail_hashes,
        t.tail_entries::varchar as tail_entries,
        t.unresolved_tail_count,
        q.params::varchar as params,
        q.query_source,
        q.shape_hash,
        null::varchar as request_digest,
        q.digest_native as request_digest_native,
        q.position,
        q.timestamp as recorded_at,
        q.native::varchar as native,
        q.seq,
    from with_prefix as q
    left join tails as t using (record_id)
)

select * exclude (seq) from final
order by session_key, seq
