-- Every answered read of the read API, one row each: who asked (the credential, the subject
-- it proved or admitted), for which tenant, purpose and moment, a hash of the request and
-- what the answer returned. Ids and hashes only, never text: a purge has nothing to remove
-- here, and `govindex retention` deletes rows older than GOVINDEX_AUDIT_RETENTION_DAYS.
CREATE TABLE read_audit (
    id               bigserial    PRIMARY KEY,
    at               timestamptz  NOT NULL DEFAULT now(),
    endpoint         text         NOT NULL
        CHECK (endpoint IN ('search', 'pack', 'chunk', 'verify', 'lineage')),
    status           integer      NOT NULL CHECK (status BETWEEN 100 AND 599),
    credential_kind  text         NOT NULL,  -- token, jwt
    credential_name  text         NOT NULL,
    subject          text,                   -- a JWT's sub
    tenant           text         NOT NULL,
    principals       text[]       NOT NULL,
    scopes           text[]       NOT NULL,
    purpose          text,
    as_of            timestamptz,
    known_at         timestamptz,
    request_hash     text         NOT NULL,  -- sha256 of the canonical request body
    chunk_ids        text[]       NOT NULL,  -- returned, in the answer's order
    pack_hash        text
);

-- `govindex audit` lists newest first, by time alone or within a tenant or a credential;
-- retention deletes by time. A principal is filtered within those rows: a GIN index on
-- the principals would tax every read's insert for a rarer question.
CREATE INDEX read_audit_at ON read_audit (at);
CREATE INDEX read_audit_tenant_at ON read_audit (tenant, at);
CREATE INDEX read_audit_credential_at ON read_audit (credential_name, at);
