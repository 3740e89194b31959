"""One error class per way the read API refuses a call, all `GovindexError`s."""

from __future__ import annotations

from pydantic import ValidationError

from govindex_client.models import ApiError


class GovindexError(Exception):
    """A call the read API did not answer: its HTTP `status` (None when no answer came),
    `error` (the API's code, e.g. `forbidden`), `reason` (what was wrong and what to do) and
    `field` (the request field it names, if any)."""

    def __init__(
        self, status: int | None, error: str, reason: str, field: str | None = None
    ) -> None:
        where = f" ({field})" if field else ""
        said = f"{status} {error}" if status is not None else error
        super().__init__(f"{said}{where}: {reason}")
        self.status, self.error, self.reason, self.field = status, error, reason, field


class BadRequest(GovindexError):
    """400: the request is malformed, or names no principals with a service token."""


class Unauthorized(GovindexError):
    """401: no credential, or one that proves nothing (invalid, expired, forged)."""


class Forbidden(GovindexError):
    """403: a tenant, principal, scope or purpose beyond what the credential proves; `field`
    names it and `reason` names it and the credential. Never narrowed silently."""


class NotFound(GovindexError):
    """404: no such chunk for this subject at `as_of` (refused and unknown look the same)."""


class Conflict(GovindexError):
    """409: the Idempotency-Key already names a pack built from another request."""


class Gone(GovindexError):
    """410: a kept pack none of whose items can be served again (deleted, revoked)."""


class TooLarge(GovindexError):
    """413: the body is larger than the route takes."""


class Unavailable(GovindexError):
    """503 after every retry: the system of record or the identity provider's keys cannot be
    read now. `attempts` says how many times the call was sent."""

    def __init__(
        self,
        status: int | None,
        error: str,
        reason: str,
        field: str | None = None,
        *,
        attempts: int = 1,
    ) -> None:
        super().__init__(status, error, reason, field)
        self.attempts = attempts


class Unreachable(GovindexError):
    """No answer: the read API could not be reached, or did not answer within the timeout
    (httpx's error is the cause). Not retried: whether a call that timed out was served is
    unknown."""


_BY_STATUS: dict[int, type[GovindexError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: TooLarge,
    503: Unavailable,
}


def refusal(status: int, body: bytes, *, attempts: int = 1) -> GovindexError:
    """The error for an answer of `status` whose body is `body` (an `ApiError`, normally)."""
    try:
        err = ApiError.model_validate_json(body)
        error, reason, field = err.error, err.reason, err.field
    except ValidationError:
        error, reason, field = "http_error", body[:200].decode(errors="replace"), None
    kind = _BY_STATUS.get(status, GovindexError)
    if kind is Unavailable:
        return Unavailable(status, error, reason, field, attempts=attempts)
    return kind(status, error, reason, field)
