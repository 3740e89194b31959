-- Chunks by version: a listing's chunk count, every purge's and retention step's
-- `DELETE FROM chunks WHERE version_id = ...` and the cascade from document_versions
-- otherwise scan the whole chunks table, so their cost grew with the corpus.
CREATE INDEX IF NOT EXISTS chunks_version ON chunks (version_id);
