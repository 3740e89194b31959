-- Stored summaries and memories register what they were built from, so a deletion finds
-- them: invalidated means text removed, status and reason kept, owners told by an event.
CREATE TABLE derived_artifacts (
    tenant_id         text        NOT NULL,
    kind              text        NOT NULL,
    artifact_id       text        NOT NULL,
    location          text        NOT NULL,
    text              text,
    built_from_docs   text[]      NOT NULL DEFAULT '{}',
    built_from_chunks text[]      NOT NULL DEFAULT '{}',
    status            text        NOT NULL DEFAULT 'valid' CHECK (status IN ('valid', 'invalidated')),
    reason            text,
    registered_at     timestamptz NOT NULL DEFAULT now(),
    invalidated_at    timestamptz,
    PRIMARY KEY (tenant_id, kind, artifact_id)
);
CREATE INDEX derived_artifacts_docs ON derived_artifacts USING gin (built_from_docs);
CREATE INDEX derived_artifacts_chunks ON derived_artifacts USING gin (built_from_chunks);
