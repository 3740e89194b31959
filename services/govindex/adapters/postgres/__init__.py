"""PostgreSQL adapters, one module per aggregate; the system of record (DESIGN §3)."""
