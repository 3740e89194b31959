-- Operator jobs: every replay, redrive, offsets reset, rebuild and backfill is a row: who
-- asked, with what, dry-run or not, where it is (checkpoint) and what it did (counts).
CREATE TABLE jobs (
    id            bigserial   PRIMARY KEY,
    kind          text        NOT NULL,
    requested_by  text        NOT NULL,
    args          jsonb       NOT NULL,
    dry_run       boolean     NOT NULL,
    state         text        NOT NULL DEFAULT 'running'
        CHECK (state IN ('running', 'paused', 'cancelled', 'succeeded', 'failed')),
    rate          double precision CHECK (rate IS NULL OR rate > 0),
    total         bigint,
    done          bigint      NOT NULL DEFAULT 0,
    counts        jsonb       NOT NULL DEFAULT '{}',
    checkpoint    jsonb       NOT NULL DEFAULT '{}',
    error         text,
    runner        text,         -- host:pid of the process running it
    heartbeat_at  timestamptz,  -- written at every step; silent for 30 s: the runner died
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);
CREATE INDEX jobs_recent ON jobs (created_at DESC);

-- What redrives did with each dead letter: no job redrives one twice.
CREATE TABLE dead_letter_actions (
    topic      text        NOT NULL,
    partition  integer     NOT NULL,
    "offset"   bigint      NOT NULL,
    action     text        NOT NULL CHECK (action IN ('redrive', 'quarantine')),
    job_id     bigint      NOT NULL REFERENCES jobs (id),
    acted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition, "offset")
);
