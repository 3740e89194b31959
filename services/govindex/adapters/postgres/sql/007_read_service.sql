-- The read service. Chunk vectors are kept here, the system of record, stamped with the
-- model that made them; any in-memory or OpenSearch/pgvector index is rebuilt from them.
CREATE TABLE chunk_vectors (
    chunk_id          text     PRIMARY KEY REFERENCES chunks (chunk_id) ON DELETE CASCADE,
    embedder          text     NOT NULL,
    embedder_version  text     NOT NULL,
    dims              integer  NOT NULL,
    vector            bytea    NOT NULL  -- unit-length float32, little-endian
);

-- The deletion gate looks up purge-mode tombstones of a document on every read.
CREATE INDEX tombstones_doc_mode ON tombstones (tenant_id, source_id, doc_id, deletion_mode, sequence);
-- Structured lookups by exact key and graph walks from both ends.
CREATE INDEX chunks_doc_id ON chunks (tenant_id, doc_id);
CREATE INDEX graph_entities_aliases ON graph_entities USING gin (aliases);
