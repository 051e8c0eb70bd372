-- inference_observations: one row per (stream, inference) across the whole output, with the
-- one observation per inference_id that inferences reports (is_selected: inference_ranks, which says
-- how it is selected).
-- The rows and their ranks are in the same order, a total one: they are put side by side by position,
-- not joined. A window over the whole rows sorted every column of every row, and a join on their keys
-- held them all beside the final stage's memory limit (docs/performance.md, "The final stage at scale").
-- observation_count (the streams of each inference) is not a column of the table (its part file
-- holds the declared ones): inferences reads it here.
-- reads: inference_ranks, inference_rows
select r.* exclude (stream_ord), k.is_selected, k.observation_count,
from inference_rows as r
positional join inference_ranks as k
