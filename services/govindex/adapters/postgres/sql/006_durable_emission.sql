-- Producers write their events to the outbox in the transaction that records their
-- decision; an event that a consumer must apply stays pending (settled_at NULL) until that
-- consumer has processed or dead-lettered it, and is re-published until then.
ALTER TABLE outbox
    ADD COLUMN event_id        text,
    ADD COLUMN awaits          text,
    ADD COLUMN tenant_id       text,
    ADD COLUMN source_id       text,
    ADD COLUMN content_hash    text,
    ADD COLUMN sequence        bigint,
    ADD COLUMN publish_count   integer     NOT NULL DEFAULT 0,
    ADD COLUMN republished_at  timestamptz,
    ADD COLUMN settled_at      timestamptz;
CREATE INDEX outbox_unsettled ON outbox (id) WHERE awaits IS NOT NULL AND settled_at IS NULL;
CREATE INDEX outbox_unsettled_blobs ON outbox (content_hash)
    WHERE content_hash IS NOT NULL AND settled_at IS NULL;

-- Events a consumer dead-lettered: settled too (the reason is on the dead-letter topic).
CREATE TABLE dead_lettered (
    consumer        text        NOT NULL,
    event_id        text        NOT NULL,
    reason          text        NOT NULL,
    dead_lettered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);
