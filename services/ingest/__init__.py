"""Connectors: turn source changes into document CloudEvents on the documents topic."""
