-- `govindex worker pause|resume KIND`: a flag every worker process obeys within seconds
-- (its consumers of that kind stop and leave their groups), and the heartbeats by which
-- an operator tool sees who runs what, paused or not.
CREATE TABLE worker_controls (
    kind          text        PRIMARY KEY,
    paused        boolean     NOT NULL,
    requested_by  text        NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE worker_heartbeats (
    runner   text        PRIMARY KEY,  -- host:pid
    kinds    text[]      NOT NULL,     -- the worker kinds the process runs
    paused   text[]      NOT NULL,     -- those of them it has stopped
    beat_at  timestamptz NOT NULL DEFAULT now()
);
