-- The reindex job that registered a generation: a job resumed after dying between the
-- registration and its checkpoint finds its generation again instead of leaving it
-- building (written to by every worker, never served) and registering another.
ALTER TABLE index_generations ADD COLUMN job_id bigint REFERENCES jobs (id);
