"""The indexer: validates document events, chunks, stamps, writes Postgres then OpenSearch."""
