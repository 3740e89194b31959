"""Why a credential or the subject it is asked for is refused: one error class per answer."""

from __future__ import annotations

from govindex.core.errors import GovindexError, TransientError

# Every refusal of a bearer value starts so: the client learns what, never the value itself.
NOT_VALID = "the token is not valid: "


class CredentialError(GovindexError):
    """A read refused for its credential or subject: answer `status` with `str(error)`.

    `reason` is a short code for the log; `field` names the request field at fault, if any.
    """

    status = 400
    reason = "credential_refused"
    field: str | None = None


class Unauthenticated(CredentialError):
    """No credential, or one that proves nothing (401, with `WWW-Authenticate: Bearer`).

    `str(error)` is for the client and never holds the credential; `detail` is for the log
    (it may quote claim values, never the token).
    """

    status = 401

    def __init__(self, reason: str, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.detail = detail or message


class Forbidden(CredentialError):
    """The request asks for more than its credential proves (403): a tenant, a principal, a
    scope or a purpose. The message names what was asked and the credential."""

    status = 403

    def __init__(self, reason: str, message: str, field: str) -> None:
        super().__init__(message)
        self.reason, self.field = reason, field


class Invalid(CredentialError):
    """The request's subject is incomplete for its credential (400), e.g. no principals with
    a service token, which carries no subject of its own."""

    status = 400

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.reason, self.field = "subject_incomplete", field


class TokenSettingsError(GovindexError, ValueError):
    """`GOVINDEX_READ_TOKENS` is refused at start; the message names the entry, never its token."""


class JwksUnavailable(TransientError):
    """The key set could not be read (file, network, size or format) and none is held."""
