-- Dense retrieval runs in PostgreSQL: chunk vectors are pgvector `vector`s, ranked by an
-- HNSW index in the same statement as the admission predicate, so a chunk the subject may
-- not see never leaves the database. The embedded server ships pgvector; a managed one
-- offers it as the `vector` extension (docs/operating/postgres.md).
CREATE EXTENSION IF NOT EXISTS vector;

-- A chunk may have one vector per model (name, version): while a new model's generation
-- is built, the live one keeps answering.
ALTER TABLE chunk_vectors DROP CONSTRAINT chunk_vectors_pkey;
ALTER TABLE chunk_vectors ADD PRIMARY KEY (chunk_id, embedder, embedder_version);
ALTER TABLE chunk_vectors ADD COLUMN embedding vector;

-- The vectors stored so far are float32, little-endian, in bytea: read them as numbers.
-- (PostgreSQL gives all bit operators one precedence, left to right: hence every bracket.)
CREATE FUNCTION pg_temp.float4_le(b bytea, i integer) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE
        WHEN e = 0 THEN m * 2.0 ^ (-149)
        ELSE (1 + m / 8388608.0) * 2.0 ^ (e - 127)
    END * CASE WHEN s = 1 THEN -1 ELSE 1 END
    FROM (
        SELECT ((bits >> 31) & 1) AS s, ((bits >> 23) & 255) AS e, (bits & 8388607) AS m
        FROM (
            SELECT (get_byte(b, 4 * i)::bigint)
                 | (get_byte(b, 4 * i + 1)::bigint << 8)
                 | (get_byte(b, 4 * i + 2)::bigint << 16)
                 | (get_byte(b, 4 * i + 3)::bigint << 24) AS bits
        ) AS word
    ) AS parts
$$;

UPDATE chunk_vectors SET embedding = (
    SELECT array_agg(pg_temp.float4_le(vector, i) ORDER BY i)::real[]::vector
    FROM generate_series(0, dims - 1) AS i
);

ALTER TABLE chunk_vectors ALTER COLUMN embedding SET NOT NULL;
ALTER TABLE chunk_vectors DROP COLUMN vector;

-- Which model's vectors answer reads: exactly one generation is live; another may be
-- building beside it (`govindex reembed`), and a switch makes it live in one commit.
CREATE TABLE vector_generations (
    embedder          text         NOT NULL,
    embedder_version  text         NOT NULL,
    dims              integer      NOT NULL CHECK (dims > 0),
    state             text         NOT NULL CHECK (state IN ('building', 'live', 'retired')),
    created_at        timestamptz  NOT NULL DEFAULT now(),
    live_at           timestamptz,
    PRIMARY KEY (embedder, embedder_version)
);
CREATE UNIQUE INDEX vector_generations_one_live ON vector_generations ((true))
    WHERE state = 'live';
INSERT INTO vector_generations (embedder, embedder_version, dims, state)
    SELECT embedder, embedder_version, min(dims), 'building'
    FROM chunk_vectors GROUP BY embedder, embedder_version;

-- Chunks committed without a configured model's vector (its service was down or slow):
-- absent from the dense channel until the indexer's backlog loop embeds them.
CREATE TABLE embedding_backlog (
    chunk_id   text         PRIMARY KEY REFERENCES chunks (chunk_id) ON DELETE CASCADE,
    queued_at  timestamptz  NOT NULL DEFAULT now()
);
CREATE INDEX embedding_backlog_queued ON embedding_backlog (queued_at, chunk_id);
