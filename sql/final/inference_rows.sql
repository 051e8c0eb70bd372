-- inference_rows: the rows of inference_candidates in the order of inference_observations, made total
-- by stream_ord (inference_ranks is in the same order).
-- reads: inference_candidates
select * from inference_candidates
order by inference_id, session_key, stream_ord
