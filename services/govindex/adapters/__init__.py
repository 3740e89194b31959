"""Adapters: one per technology, the only modules that speak a driver's protocol."""
