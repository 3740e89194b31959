-- Indexes for statements that otherwise scanned a whole growing table (found by
-- tests/e2e/test_statement_plans_workload.py, which explains every statement of a workload
-- on an inflated database). Plain CREATE INDEX: migrations run in a transaction, where
-- CONCURRENTLY is refused; on a large deployment an operator may create them CONCURRENTLY
-- under these names first, and this migration then finds them.

-- A version's edges: every purge and retention step (`DELETE FROM graph_edges WHERE
-- version_id = ...`), a metadata update and a re-parse re-stamping them, and the indexer
-- continuing restated edges (`UPDATE graph_edges ... WHERE n.version_id = u.v`).
CREATE INDEX IF NOT EXISTS graph_edges_version ON graph_edges (version_id);

-- The blobs a purge may delete: the document's outbox rows that point to a blob
-- (`outbox WHERE key = ... AND sequence <= ... AND content_hash IS NOT NULL`) ...
CREATE INDEX IF NOT EXISTS outbox_key_blobs ON outbox (key, sequence)
    WHERE content_hash IS NOT NULL;
-- ... unless a version still holding content has the same hash.
CREATE INDEX IF NOT EXISTS document_versions_content_hash ON document_versions (content_hash)
    WHERE content IS NOT NULL;

-- The relay's prune: rows published longer ago than the retention (a day by default).
CREATE INDEX IF NOT EXISTS outbox_published ON outbox (published_at)
    WHERE published_at IS NOT NULL;

-- Foreign keys whose referencing column led no index: deleting a job would scan these
-- tables to check them.
CREATE INDEX IF NOT EXISTS dead_letter_actions_job ON dead_letter_actions (job_id);
CREATE INDEX IF NOT EXISTS index_generations_job ON index_generations (job_id);
