"""The control plane, above the services it runs: which services run in a process (worker
compositions), the deletion lane composing the indexer and the purger, the jobs engine and
every job, the admin API, status, bootstrap, metrics wiring and self-healing."""
