-- What a job did with each record it looked at (a replay's prediction and what it
-- re-published), written in the same transaction as the step's checkpoint: the audit trail
-- of a dry run, and what an execute is compared with.
CREATE TABLE job_items (
    job_id      bigint      NOT NULL REFERENCES jobs (id),
    seq         bigserial,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    "offset"    bigint      NOT NULL,
    event_id    text        NOT NULL,
    doc_key     text        NOT NULL,
    event_type  text        NOT NULL,
    sequence    bigint,
    outcome     text        NOT NULL,
    reason      text        NOT NULL DEFAULT '',
    PRIMARY KEY (job_id, topic, partition, "offset")
);
