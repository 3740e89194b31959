"""What a credential proves, and the subject a read may run as: admitted, or refused."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from govindex.core.inputs import quote
from reader.credentials.errors import Forbidden, Invalid

CredentialKind = Literal["token", "jwt"]


@dataclass(frozen=True)
class Proven:
    """What a credential proves. `tenants` None: every tenant.

    A JWT proves exactly `principals` (`user:<sub>`, `group:<g>`) and `scopes`, for its one
    tenant; `subject` is its `sub`. A service token proves no subject of its own: the
    principals it may assert are the globs `principal_patterns`, scopes as asked (`scopes`
    None). `purposes` None: any purpose.
    """

    kind: CredentialKind
    name: str
    tenants: frozenset[str] | None
    principals: frozenset[str] = frozenset()
    principal_patterns: tuple[str, ...] = ()
    scopes: frozenset[str] | None = None
    purposes: frozenset[str] | None = None
    subject: str | None = None

    @property
    def label(self) -> str:
        """The credential as messages and logs name it: `'rag-app'`, `'jwt:<iss>' (sub 'x')`."""
        shown = quote(self.name)
        return shown if self.subject is None else f"{shown} (sub {quote(self.subject)})"


@dataclass(frozen=True)
class Admitted:
    """The subject a read runs as: sorted, without duplicates, all proven."""

    principals: tuple[str, ...]
    scopes: tuple[str, ...]


def admit(
    proven: Proven,
    tenant: str,
    principals: list[str] | None,
    scopes: list[str] | None,
    purpose: str,
) -> Admitted:
    """The subject a read for `tenant` and `purpose` may run as, or the refusal.

    Never narrows silently: the tenant must be proven (else `Forbidden`); with a JWT,
    `principals` None means the token's own and given ones must all be the token's; with a
    service token they are required (`Invalid`) and each must match one of its patterns;
    `scopes` None means the JWT's own (none for a token), given ones must all be the JWT's
    (a token passes them as asked); the purpose must be one the credential allows. Any
    principal, scope or purpose beyond the credential is `Forbidden` naming it.
    """
    prove_tenant(proven, tenant)
    if proven.kind == "jwt":
        asked = _proven_subset(proven, "principal", principals, proven.principals)
        if not asked:
            raise Invalid(
                "give at least one principal, or omit principals to read as the token's own",
                "principals",
            )
    else:
        asked = _matching_patterns(proven, principals)
    granted = _proven_subset(proven, "scope", scopes, proven.scopes)
    if proven.purposes is not None and purpose not in proven.purposes:
        raise Forbidden(
            "purpose_not_proven",
            f"the credential {proven.label} does not allow purpose {quote(purpose)} (it allows "
            f"{quote(sorted(proven.purposes))}): read for one of those, or use another credential",
            "purpose",
        )
    return Admitted(principals=asked, scopes=granted)


def prove_tenant(proven: Proven, tenant: str) -> None:
    """Refuse (`Forbidden`) a tenant the credential does not prove; for routes that act for a
    tenant without a subject (verifying a manifest, registering lineage)."""
    if proven.tenants is not None and tenant not in proven.tenants:
        raise Forbidden(
            "tenant_not_proven",
            f"the credential {proven.label} does not prove tenant {quote(tenant)} (it proves "
            f"{quote(sorted(proven.tenants))}): use a credential for that tenant",
            "tenant",
        )


def _proven_subset(
    proven: Proven, what: str, asked: list[str] | None, held: frozenset[str] | None
) -> tuple[str, ...]:
    """`asked` if every item is in `held` (None: the credential's own); `held` None: as asked."""
    if held is None:
        return tuple(sorted(set(asked or ())))
    if asked is None:
        return tuple(sorted(held))
    for item in asked:
        if item not in held:
            raise Forbidden(
                f"{what}_not_proven",
                f"the credential {proven.label} does not prove {what} {quote(item)}: ask only for "
                f"{what}s the token carries, or omit {what}s to use them all",
                f"{what}s",
            )
    return tuple(sorted(set(asked)))


def _matching_patterns(proven: Proven, asked: list[str] | None) -> tuple[str, ...]:
    patterns = proven.principal_patterns
    if not asked:
        raise Invalid(
            f"a service token carries no subject: send the principals the read is for (the "
            f"credential {proven.label} may assert those matching {quote(list(patterns))})",
            "principals",
        )
    for principal in asked:
        if not any(fnmatchcase(principal, pattern) for pattern in patterns):
            raise Forbidden(
                "principal_not_proven",
                f"the credential {proven.label} may not assert principal {quote(principal)}: it "
                f"may assert only principals matching {quote(list(patterns))}",
                "principals",
            )
    return tuple(sorted(set(asked)))
