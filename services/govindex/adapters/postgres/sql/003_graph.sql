-- Graph from structure. Edges are versioned like documents: a new version of the evidence
-- ends the old edges' validity (valid time) and supersedes them (system time), so a fact
-- that changed (a new owner) is kept as a new edge, never overwritten.
CREATE TABLE graph_entities (
    tenant_id   text    NOT NULL,
    entity_id   text    NOT NULL,
    kind        text    NOT NULL,
    aliases     text[]  NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, entity_id)
);

CREATE TABLE graph_edges (
    edge_id           text        PRIMARY KEY,
    tenant_id         text        NOT NULL,
    subject           text        NOT NULL,
    relation          text        NOT NULL,
    object            text        NOT NULL,
    source_id         text        NOT NULL,
    doc_id            text        NOT NULL,
    version_id        text        NOT NULL,
    version_sequence  bigint      NOT NULL,
    source_version    text        NOT NULL,
    evidence_chunk_id text,
    valid_from        timestamptz NOT NULL,
    valid_to          timestamptz,
    recorded_at       timestamptz NOT NULL,
    superseded_at     timestamptz
);
CREATE INDEX graph_edges_subject ON graph_edges (tenant_id, subject, relation);
CREATE INDEX graph_edges_object ON graph_edges (tenant_id, object, relation);
CREATE INDEX graph_edges_doc ON graph_edges (tenant_id, source_id, doc_id);
