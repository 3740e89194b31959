-- Deliveries already acted on: a redelivered webhook is recognised and emits nothing twice.
CREATE TABLE webhook_deliveries (
    provider      text        NOT NULL,
    delivery_id   text        NOT NULL,
    source_id     text,
    outcome       text        NOT NULL,
    received_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, delivery_id)
);
