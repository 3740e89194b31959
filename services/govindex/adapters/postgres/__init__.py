"""PostgreSQL adapters, one module per aggregate; the system of record (docs/design/records.md)."""
