-- What a worker process is putting back after a server's restart (NULL: nothing), so that
-- `govindex status` says the broker is not ok while consumers rejoin a broker that lost
-- its log, however quickly the broker itself came back.
ALTER TABLE worker_heartbeats ADD COLUMN healing text;
