"""A document's key as query parameters, one document or a column per part, and its lock."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import LiteralString

from govindex.adapters.postgres.arrays import text_array
from govindex.core.ports import DocumentKey

DOC_WHERE: LiteralString = "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s"


def key_params(key: DocumentKey) -> tuple[str, str, str]:
    """The parameters of `DOC_WHERE`."""
    return (key.tenant_id, key.source_id, key.doc_id)


def key_columns(keys: Sequence[DocumentKey]) -> tuple[str, str, str]:
    """Three arrays, for `unnest(%s::text[], %s::text[], %s::text[])`, in their text form
    (`govindex.adapters.postgres.arrays`)."""
    return (
        text_array(k.tenant_id for k in keys),
        text_array(k.source_id for k in keys),
        text_array(k.doc_id for k in keys),
    )


def lock_id(key: DocumentKey) -> int:
    """The advisory lock of a document: 64 bits of a hash of its key (signed, as Postgres
    wants). A collision only makes two documents wait for each other."""
    digest = hashlib.blake2b(
        f"{key.tenant_id}\x00{key.source_id}\x00{key.doc_id}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)
