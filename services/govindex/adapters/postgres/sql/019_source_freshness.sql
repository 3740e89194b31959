-- When a source last synced successfully (a snapshot synced whole, a CDC change recorded):
-- a source older than its manifest's refresh_sla is stale, and its chunks say so.
ALTER TABLE sources ADD COLUMN last_synced_at timestamptz;
