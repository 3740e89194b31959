"""The one way a read's access is built, from a request, a manifest or a query string.

Over HTTP a read runs as the subject its credential admitted (`reader.credentials.admit`):
`admitted_request` and `admitted_access` build from that, never from what was asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TypeVar

from govindex.core.ports import ReadAccess
from reader.credentials import Admitted
from reader.models import Manifest, PackRequest, RelationsRequest, SearchRequest, Subject

R = TypeVar("R", SearchRequest, PackRequest, RelationsRequest)


def read_access(
    *,
    tenant: str,
    principals: Iterable[str],
    scopes: Iterable[str],
    purpose: str,
    as_of: datetime,
    known_at: datetime | None = None,
) -> ReadAccess:
    """Principals and scopes as sorted sets: however a subject was spelled (order,
    repeats), the same subject is judged by the same access."""
    return ReadAccess(
        tenant_id=tenant,
        principals=tuple(sorted(set(principals))),
        scopes=tuple(sorted(set(scopes))),
        purpose=purpose,
        as_of=as_of,
        known_at=known_at,
    )


def admitted_request(request: R, admitted: Admitted) -> R:
    """`request` with its subject replaced by the admitted one: the access, the cache key and
    tags, and the subject a pack's manifest names are then all of what was proven."""
    subject = Subject(principals=list(admitted.principals), scopes=list(admitted.scopes))
    return request.model_copy(update={"subject": subject})


def admitted_access(
    *, tenant: str, admitted: Admitted, purpose: str, as_of: datetime
) -> ReadAccess:
    """The access of a read that names its subject outside a body (opening one anchor)."""
    return read_access(
        tenant=tenant,
        principals=admitted.principals,
        scopes=admitted.scopes,
        purpose=purpose,
        as_of=as_of,
    )


def request_access(request: SearchRequest, now: datetime) -> ReadAccess:
    """A search or pack request about `as_of`, or about `now` when it names no moment.

    Raises `ValueError` for a subject without principals: in process there is no credential
    to take them from, and over HTTP `admitted_request` always names them."""
    subject = request.subject
    if subject.principals is None:
        raise ValueError(
            "a read run in process names its principals (subject.principals): there is no "
            "credential to take them from"
        )
    return read_access(
        tenant=request.tenant,
        principals=subject.principals,
        scopes=subject.scopes or (),
        purpose=request.purpose,
        as_of=request.as_of or now,
        known_at=request.known_at,
    )


def manifest_access(manifest: Manifest) -> ReadAccess:
    """The access a pack was built for, as verification re-judges it: at its own as_of, by
    what the index holds now (not at the pack's known_at), so a change recorded since shows.
    A manifest always names its subject (the model refuses one that does not)."""
    subject = manifest.subject
    return read_access(
        tenant=manifest.tenant,
        principals=subject.principals or (),
        scopes=subject.scopes or (),
        purpose=manifest.purpose,
        as_of=manifest.as_of,
    )


def relations_access(request: RelationsRequest, now: datetime) -> ReadAccess:
    """A relations request's access: like a search's (it names its subject, as admitted)."""
    principals = request.subject.principals
    if principals is None:
        raise ValueError("a relations read run in process names its principals")
    return read_access(
        tenant=request.tenant,
        principals=principals,
        scopes=request.subject.scopes or (),
        purpose=request.purpose,
        as_of=request.as_of or now,
        known_at=request.known_at,
    )
