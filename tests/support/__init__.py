"""Builders and helpers the tests share (never imported from a test module)."""
