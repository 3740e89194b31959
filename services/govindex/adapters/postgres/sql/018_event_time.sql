-- When the business event a chunk (and the edges it states) records happened, as opposed
-- to when the source was observed (observed_at) or the content holds (valid time): a
-- deployment that finished at 02:01 and was committed at 02:10 happened at 02:01. Null:
-- not known. Searches and packs filter by it.
ALTER TABLE chunks ADD COLUMN event_time timestamptz;
ALTER TABLE graph_edges ADD COLUMN event_time timestamptz;
CREATE INDEX chunks_event_time ON chunks (tenant_id, event_time) WHERE event_time IS NOT NULL;
