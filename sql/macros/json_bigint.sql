-- json_bigint(v): the value of the JSON value `v` when it is a JSON integer that fits BIGINT, else null.
-- The rule of every count and code read from a line's JSON (docs/asr-tables.md, "a count is taken
-- only when it is a JSON integer that fits 64 bits"): an integer from -2^63 to 2^63 - 1 is mapped;
-- a larger one (json_type UBIGINT from 2^63, DOUBLE beyond 2^64), a float even with an integral value
-- (`1.0`), a string (`"1"`), a boolean, an array or object, JSON null and an absent field (SQL null)
-- give null. number_faults.sql declares every present value this drops (`number_not_mapped`).
create or replace temp macro json_bigint(v) as
    case when json_type(v) in ('BIGINT', 'UBIGINT') then try_cast(v::varchar as bigint) end
