-- A chunk of the embedding backlog is claimed by the indexer embedding it, until
-- `claimed_until`: several indexers drain the backlog side by side without embedding (and
-- inserting into the HNSW graph) the same chunk twice, and a claim whose indexer died
-- lapses, so another takes the chunk. No transaction stays open while a model embeds.
ALTER TABLE embedding_backlog ADD COLUMN IF NOT EXISTS claimed_until timestamptz;
