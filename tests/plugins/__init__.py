"""pytest plugins: the session stack and per-test isolation fixtures."""
