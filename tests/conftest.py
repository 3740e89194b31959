"""Fixtures come from plugins; helpers from tests.support (never from a test module)."""

pytest_plugins = ["tests.plugins.stack"]
