-- Packs kept under an idempotency key (or asked to be kept): what `GET /v1/packs/{id}`
-- serves again and what a retried request answers with. The row holds the pack without
-- its items' text (manifest, trace, budgets, the items' order); each item's text lives in
-- derived_artifacts (kind 'pack'), registered in lineage with the document and chunks it
-- copies, so a deletion, a purge or retention removes it like any stored summary.
CREATE TABLE stored_packs (
    pack_id          text         PRIMARY KEY,
    tenant_id        text         NOT NULL,
    credential_name  text         NOT NULL,
    idempotency_key  text,
    request_hash     text         NOT NULL,
    pack_hash        text         NOT NULL,
    built_at         timestamptz  NOT NULL,
    stored_at        timestamptz  NOT NULL DEFAULT now(),
    expires_at       timestamptz  NOT NULL,
    shell            jsonb        NOT NULL
);
-- One key names one pack per credential and tenant: the same key with another body is 409.
CREATE UNIQUE INDEX stored_packs_idempotency
    ON stored_packs (tenant_id, credential_name, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX stored_packs_expiry ON stored_packs (expires_at);

-- Reading a stored pack back, and reading relations, are audited too.
ALTER TABLE read_audit DROP CONSTRAINT read_audit_endpoint_check;
ALTER TABLE read_audit ADD CONSTRAINT read_audit_endpoint_check
    CHECK (endpoint IN ('search', 'pack', 'chunk', 'verify', 'lineage', 'stored_pack',
                        'relations'));
