-- govindex system of record. Postgres holds every decision the pipeline makes: the order
-- guard, tombstones, versions with valid and system time, chunk text, the outbox.

CREATE TABLE sources (
    tenant_id       text        NOT NULL,
    source_id       text        NOT NULL,
    manifest        jsonb       NOT NULL,
    enabled         boolean     NOT NULL,
    registered_at   timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, source_id)
);
-- A source id names one source, whatever the tenant: events are routed by it.
CREATE UNIQUE INDEX sources_source_id ON sources (source_id);

-- One row per document: the order guard. last_sequence is the highest sequence ever applied,
-- deletes included, so a late create/update with sequence <= a tombstone's is dropped.
CREATE TABLE documents (
    tenant_id           text        NOT NULL,
    source_id           text        NOT NULL,
    doc_id              text        NOT NULL,
    state               text        NOT NULL CHECK (state IN ('active', 'deleted')),
    last_sequence       bigint      NOT NULL,
    current_version_id  text,
    source_version      text        NOT NULL,
    content_hash        text,
    path                text,
    last_indexed_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, source_id, doc_id)
);

-- Content revisions of a document. A new revision supersedes the previous one (system
-- time: superseded_at) and ends its validity at the new one's valid_from (valid time).
CREATE TABLE document_versions (
    version_id          text        PRIMARY KEY,
    tenant_id           text        NOT NULL,
    source_id           text        NOT NULL,
    doc_id              text        NOT NULL,
    version_sequence    bigint      NOT NULL,
    sequence            bigint      NOT NULL,
    source_version      text        NOT NULL,
    content_hash        text        NOT NULL,
    content             text,
    media_type          text        NOT NULL,
    title               text,
    metadata            jsonb       NOT NULL DEFAULT '{}',
    declared_valid_to   timestamptz,
    valid_from          timestamptz NOT NULL,
    valid_to            timestamptz,
    observed_at         timestamptz NOT NULL,
    recorded_at         timestamptz NOT NULL,
    superseded_at       timestamptz,
    parser              text        NOT NULL,
    parser_version      text        NOT NULL,
    content_purged_at   timestamptz
);
CREATE INDEX document_versions_doc ON document_versions (tenant_id, source_id, doc_id, version_sequence);

CREATE TABLE chunks (
    chunk_id              text        PRIMARY KEY,
    version_id            text        NOT NULL REFERENCES document_versions (version_id) ON DELETE CASCADE,
    tenant_id             text        NOT NULL,
    source_id             text        NOT NULL,
    doc_id                text        NOT NULL,
    source_version        text        NOT NULL,
    -- sequence of the event that last changed this row: the OpenSearch external version.
    sequence              bigint      NOT NULL,
    version_sequence      bigint      NOT NULL,
    content_hash          text        NOT NULL,
    text                  text        NOT NULL,
    valid_from            timestamptz NOT NULL,
    valid_to              timestamptz,
    recorded_at           timestamptz NOT NULL,
    superseded_at         timestamptz,
    observed_at           timestamptz NOT NULL,
    indexed_at            timestamptz NOT NULL,
    acl                   text[]      NOT NULL CHECK (cardinality(acl) > 0),
    required_scopes       text[]      NOT NULL,
    allowed_purposes      text[]      NOT NULL,
    classification        text        NOT NULL,
    parser                text        NOT NULL,
    parser_version        text        NOT NULL,
    locator               text        NOT NULL,
    char_start            integer     NOT NULL,
    char_end              integer     NOT NULL,
    line_start            integer     NOT NULL,
    line_end              integer     NOT NULL,
    heading_path          text[]      NOT NULL,
    parent_id             text,
    prev_id               text,
    next_id               text,
    ordinal               integer     NOT NULL,
    kind                  text        NOT NULL,
    trust_level           text        NOT NULL,
    contains_instructions boolean     NOT NULL,
    token_estimate        integer     NOT NULL,
    simhash               bigint      NOT NULL,
    index_generation      integer     NOT NULL,
    tsv                   tsvector    GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
);
CREATE INDEX chunks_doc ON chunks (tenant_id, source_id, doc_id, sequence);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv);

-- What is left of a deleted document: ids, hashes, reason and times. Never content.
CREATE TABLE tombstones (
    tenant_id       text        NOT NULL,
    source_id       text        NOT NULL,
    doc_id          text        NOT NULL,
    sequence        bigint      NOT NULL,
    event_id        text        NOT NULL,
    source_version  text        NOT NULL,
    reason          text        NOT NULL,
    deletion_mode   text        NOT NULL,
    deleted_at      timestamptz NOT NULL,
    recorded_at     timestamptz NOT NULL,
    version_ids     text[]      NOT NULL,
    content_hashes  text[]      NOT NULL,
    chunk_ids       text[]      NOT NULL,
    purge_state     text        NOT NULL CHECK (purge_state IN ('pending', 'purged', 'failed')),
    purge_attempts  integer     NOT NULL DEFAULT 0,
    purge_error     text,
    purged_at       timestamptz,
    PRIMARY KEY (tenant_id, source_id, doc_id, sequence)
);
CREATE INDEX tombstones_pending ON tombstones (purge_state) WHERE purge_state <> 'purged';

CREATE TABLE purge_receipts (
    receipt_id      bigserial   PRIMARY KEY,
    tenant_id       text        NOT NULL,
    source_id       text        NOT NULL,
    doc_id          text        NOT NULL,
    sequence        bigint      NOT NULL,
    receipt         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX purge_receipts_doc ON purge_receipts (tenant_id, source_id, doc_id);

-- The idempotent consumer: "consumer C processed event E", in the same transaction as the write.
CREATE TABLE processed_events (
    consumer        text        NOT NULL,
    event_id        text        NOT NULL,
    processed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

-- Events to publish, written in the same transaction as the state they announce.
CREATE TABLE outbox (
    id              bigserial   PRIMARY KEY,
    topic           text        NOT NULL,
    key             text        NOT NULL,
    value           bytea       NOT NULL,
    headers         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    published_at    timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;

-- Claim check: content too large to travel inline, addressed by its sha256.
CREATE TABLE blobs (
    content_hash    text        PRIMARY KEY,
    content         text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- Connectors' checkpoints and the per-document sequence counter.
CREATE TABLE ingest_checkpoints (
    tenant_id       text        NOT NULL,
    source_id       text        NOT NULL,
    position        text        NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, source_id)
);

CREATE TABLE ingest_documents (
    tenant_id       text        NOT NULL,
    source_id       text        NOT NULL,
    doc_id          text        NOT NULL,
    last_sequence   bigint      NOT NULL,
    content_hash    text,
    deleted         boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, source_id, doc_id)
);

-- OpenSearch generations behind the alias; Postgres can rebuild any of them.
CREATE TABLE index_generations (
    alias           text        NOT NULL,
    generation      integer     NOT NULL,
    index_name      text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('building', 'live', 'retired')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (alias, generation)
);
