"""A read's credential proves its subject: service tokens bound to patterns and purposes, and
JWTs verified against a JWKS with real signatures; anything beyond them is refused (issue 21)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import time
import urllib.error
import urllib.request
from http.client import HTTPMessage
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from pydantic import ValidationError

from reader.credentials import (
    JWKS_MAX_BYTES,
    Admitted,
    Authenticator,
    BoundToken,
    Forbidden,
    Invalid,
    JwksUnavailable,
    JwtConfig,
    JwtVerifier,
    Proven,
    TokenSettingsError,
    Unauthenticated,
    _HttpsRedirectsOnly,
    admit,
    bound_tokens,
    default_token_name,
    prove_tenant,
)

ISSUER = "https://idp.example.test/realms/acme"
AUDIENCE = "govindex-read"
BOUND = "bound-token-0123456789abcdef"
LISTED = "listed-token-0123456789abcdef"
DROP = object()  # a claim left out of the token

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


class Clock:
    """The verifier's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def ed_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def public_jwk(private: PrivateKey, kid: str, alg: str | None = None) -> dict[str, Any]:
    public = private.public_key()
    data: dict[str, Any]
    if isinstance(public, rsa.RSAPublicKey):
        data = RSAAlgorithm.to_jwk(public, as_dict=True)
    elif isinstance(public, ec.EllipticCurvePublicKey):
        data = ECAlgorithm.to_jwk(public, as_dict=True)
    else:
        data = OKPAlgorithm.to_jwk(public, as_dict=True)
    data.update(kid=kid, use="sig")
    if alg is not None:
        data["alg"] = alg
    return data


def write_jwks(path: Path, *keys: dict[str, Any]) -> None:
    path.write_text(json.dumps({"keys": list(keys)}))


def claims(**overrides: object) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, object] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "tenant": "acme",
        "groups": ["eng"],
        "scope": "docs.read",
        "iat": now,
        "exp": now + 300,
    }
    return {k: v for k, v in {**base, **overrides}.items() if v is not DROP}


def signed(
    payload: dict[str, Any], private: PrivateKey, kid: str = "rsa-1", alg: str = "RS256"
) -> str:
    return jwt.encode(payload, private, algorithm=alg, headers={"kid": kid})


def sign(private: PrivateKey, kid: str = "rsa-1", alg: str = "RS256", **overrides: object) -> str:
    return signed(claims(**overrides), private, kid, alg)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def crafted(header: dict[str, Any], payload: dict[str, Any], hmac_key: bytes | None) -> str:
    """A JWT put together by hand: HMAC-SHA256 over it with `hmac_key`, or no signature."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(payload).encode())}"
    signature = b""
    if hmac_key is not None:
        signature = hmac.new(hmac_key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


@pytest.fixture
def jwks_file(
    tmp_path: Path,
    rsa_key: rsa.RSAPrivateKey,
    ec_key: ec.EllipticCurvePrivateKey,
    ed_key: ed25519.Ed25519PrivateKey,
) -> Path:
    path = tmp_path / "jwks.json"
    keys = (
        public_jwk(rsa_key, "rsa-1", "RS256"),
        public_jwk(ec_key, "ec-1"),
        public_jwk(ed_key, "ed-1"),
    )
    write_jwks(path, *keys)
    return path


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def verifier(jwks_file: Path, clock: Clock) -> JwtVerifier:
    config = JwtConfig(jwks=str(jwks_file), issuer=ISSUER, audience=AUDIENCE)
    return JwtVerifier(config, clock=clock)


@pytest.fixture
def auth(verifier: JwtVerifier) -> Authenticator:
    tokens = bound_tokens(
        {
            BOUND: {
                "name": "rag-app",
                "tenants": ["acme"],
                "principals": ["user:*", "group:eng-*"],
                "purposes": ["support"],
            },
            LISTED: ["acme", "globex"],
        }
    )
    return Authenticator(tokens, verifier)


def bearer(value: str) -> str:
    return f"Bearer {value}"


def refused(auth: Authenticator, header: str | None) -> Unauthenticated:
    with pytest.raises(Unauthenticated) as caught:
        auth.authenticate(header)
    return caught.value


# --- verified JWTs -------------------------------------------------------------------------


def test_a_verified_jwt_proves_its_sub_groups_tenant_and_scopes(
    auth: Authenticator, rsa_key: rsa.RSAPrivateKey
) -> None:
    token = sign(rsa_key, groups=["eng", "oncall"], scope="docs.read docs.write")

    proven = auth.authenticate(bearer(token))

    assert proven == Proven(
        kind="jwt",
        name=f"jwt:{ISSUER}",
        subject="alice",
        tenants=frozenset({"acme"}),
        principals=frozenset({"user:alice", "group:eng", "group:oncall"}),
        scopes=frozenset({"docs.read", "docs.write"}),
        purposes=None,
    )


@pytest.mark.parametrize(("groups", "sees_hr"), [(["hr"], True), (["eng"], False)])
def test_an_hr_only_decision_sees_group_hr_only_when_the_token_carries_it(
    auth: Authenticator, rsa_key: rsa.RSAPrivateKey, groups: list[str], sees_hr: bool
) -> None:
    proven = auth.authenticate(bearer(sign(rsa_key, groups=groups)))

    admitted = admit(proven, "acme", None, None, "support")

    assert ("group:hr" in admitted.principals) is sees_hr
    assert "user:alice" in admitted.principals


@pytest.mark.parametrize(("kid", "alg"), [("ec-1", "ES256"), ("ed-1", "EdDSA"), ("rsa-1", "RS256")])
def test_ec_ed25519_and_rsa_tokens_verify_against_their_keys(
    auth: Authenticator,
    rsa_key: rsa.RSAPrivateKey,
    ec_key: ec.EllipticCurvePrivateKey,
    ed_key: ed25519.Ed25519PrivateKey,
    kid: str,
    alg: str,
) -> None:
    keys: dict[str, PrivateKey] = {"ec-1": ec_key, "ed-1": ed_key, "rsa-1": rsa_key}
    private = keys[kid]

    proven = auth.authenticate(bearer(sign(private, kid=kid, alg=alg)))

    assert proven.principals == {"user:alice", "group:eng"}


@pytest.mark.parametrize(
    ("scope_claims", "expected"),
    [
        ({"scope": "a b  c"}, {"a", "b", "c"}),
        ({"scope": DROP, "scp": ["a", "b"]}, {"a", "b"}),
        ({"scope": DROP, "scp": "a b"}, {"a", "b"}),  # some providers send scp as a string
        ({"scope": DROP}, set()),
    ],
)
def test_scopes_come_from_scope_or_scp(
    auth: Authenticator,
    rsa_key: rsa.RSAPrivateKey,
    scope_claims: dict[str, object],
    expected: set[str],
) -> None:
    proven = auth.authenticate(bearer(signed(claims(**scope_claims), rsa_key)))

    assert proven.scopes == frozenset(expected)


def test_a_token_past_exp_by_less_than_the_leeway_still_verifies(
    auth: Authenticator, rsa_key: rsa.RSAPrivateKey
) -> None:
    now = int(time.time())
    token = sign(rsa_key, iat=now - 600, exp=now - 10)

    assert auth.authenticate(bearer(token)).subject == "alice"


@pytest.mark.parametrize(
    ("overrides", "reason", "said"),
    [
        ({"exp": 1_000_000_000}, "expired", "it has expired"),  # 2001
        ({"nbf": 4_102_444_800}, "not_yet_valid", "it is not valid yet"),  # 2100
        ({"iat": 4_102_444_800}, "not_yet_valid", "it is not valid yet"),
        ({"aud": "another-app"}, "wrong_audience", "another audience"),
        ({"iss": "https://evil.example.test"}, "wrong_issuer", "another issuer"),
        ({"iss": ISSUER[:-2]}, "wrong_issuer", "another issuer"),  # a substring is not a match
        ({"exp": DROP}, "missing_claim", "no 'exp' claim"),
        ({"sub": DROP}, "missing_claim", "no 'sub' claim"),
        ({"tenant": DROP}, "bad_claim", "'tenant' claim is missing"),
        ({"tenant": "acme/other"}, "bad_claim", "is not a tenant id"),
        ({"tenant": ["acme"]}, "bad_claim", "is not a tenant id"),
        ({"groups": "hr"}, "bad_claim", "'groups' claim is not a list of strings"),
        ({"groups": ["hr", 7]}, "bad_claim", "'groups' claim is not a list of strings"),
        ({"groups": None}, "bad_claim", "'groups' claim is not a list of strings"),
        ({"groups": ["two words"]}, "bad_claim", "is not a usable principal"),
        ({"scp": {"a": 1}}, "bad_claim", "'scp' claim is neither"),
    ],
)
def test_a_jwt_with_a_bad_claim_is_unauthenticated_with_the_reason(
    auth: Authenticator,
    rsa_key: rsa.RSAPrivateKey,
    overrides: dict[str, object],
    reason: str,
    said: str,
) -> None:
    token = signed(claims(**overrides), rsa_key)

    error = refused(auth, bearer(token))

    assert error.status == 401 and error.reason == reason
    assert str(error).startswith("the token is not valid: ") and said in str(error)
    assert token not in str(error) and token not in error.detail


def test_a_jwt_signed_by_another_key_under_a_known_kid_is_refused(
    auth: Authenticator, other_rsa_key: rsa.RSAPrivateKey
) -> None:
    error = refused(auth, bearer(sign(other_rsa_key, kid="rsa-1")))

    assert error.reason == "bad_signature"
    assert str(error) == "the token is not valid: its signature does not verify"


def test_a_jwt_with_an_unknown_kid_is_refused(
    auth: Authenticator, other_rsa_key: rsa.RSAPrivateKey
) -> None:
    error = refused(auth, bearer(sign(other_rsa_key, kid="not-published")))

    assert error.reason == "unknown_key"
    assert str(error) == "the token is not valid: its signing key (kid) is unknown"


def test_alg_none_is_refused_before_the_key_set_is_read(
    auth: Authenticator, verifier: JwtVerifier
) -> None:
    token = crafted({"alg": "none", "typ": "JWT", "kid": "rsa-1"}, claims(), hmac_key=None)
    assert token.endswith(".")

    error = refused(auth, bearer(token))

    assert error.reason == "algorithm_refused" and "'none' is not accepted" in str(error)
    assert verifier.reads == 0


def test_hs256_signed_with_the_public_key_pem_is_refused_before_any_key_is_used(
    auth: Authenticator, verifier: JwtVerifier, rsa_key: rsa.RSAPrivateKey
) -> None:
    pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    token = crafted({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, claims(), hmac_key=pem)

    error = refused(auth, bearer(token))

    assert error.reason == "algorithm_refused" and "'HS256' is not accepted" in str(error)
    assert verifier.reads == 0


def test_a_token_whose_alg_does_not_match_its_keys_type_is_refused(
    auth: Authenticator, ec_key: ec.EllipticCurvePrivateKey, rsa_key: rsa.RSAPrivateKey
) -> None:
    ec_under_rsa_kid = sign(ec_key, kid="rsa-1", alg="ES256")
    ps_under_rs256_key = sign(rsa_key, kid="rsa-1", alg="PS256")  # the JWK declares RS256

    for token in (ec_under_rsa_kid, ps_under_rs256_key):
        error = refused(auth, bearer(token))
        assert error.reason == "key_mismatch"


@pytest.mark.parametrize("header", [{"alg": "RS256"}, {"alg": "RS256", "kid": ""}])
def test_a_jwt_without_a_kid_is_refused(
    auth: Authenticator, rsa_key: rsa.RSAPrivateKey, header: dict[str, str]
) -> None:
    token = jwt.encode(claims(), rsa_key, algorithm="RS256", headers=header)
    if "kid" not in header:
        assert "kid" not in jwt.get_unverified_header(token)

    assert refused(auth, bearer(token)).reason == "no_kid"


def test_a_malformed_jwt_is_refused_without_echoing_it(auth: Authenticator) -> None:
    token = "eyJub3QganNvbg.eyJzdWIiOiJ4In0.c2ln"

    error = refused(auth, bearer(token))

    assert error.reason == "malformed" and token not in str(error) + error.detail


# --- the key set ---------------------------------------------------------------------------


def test_a_key_rotated_into_the_jwks_file_verifies_without_a_new_verifier(
    auth: Authenticator,
    verifier: JwtVerifier,
    jwks_file: Path,
    rsa_key: rsa.RSAPrivateKey,
    other_rsa_key: rsa.RSAPrivateKey,
) -> None:
    assert auth.authenticate(bearer(sign(rsa_key))).subject == "alice"
    write_jwks(jwks_file, public_jwk(rsa_key, "rsa-1"), public_jwk(other_rsa_key, "rsa-2"))

    proven = auth.authenticate(bearer(sign(other_rsa_key, kid="rsa-2", sub="bob")))

    assert proven.subject == "bob" and verifier.reads == 2


def test_a_storm_of_unknown_kids_reads_the_jwks_once_per_interval(
    auth: Authenticator,
    verifier: JwtVerifier,
    jwks_file: Path,
    clock: Clock,
    rsa_key: rsa.RSAPrivateKey,
    other_rsa_key: rsa.RSAPrivateKey,
) -> None:
    auth.authenticate(bearer(sign(rsa_key)))
    for n in range(50):
        refused(auth, bearer(sign(other_rsa_key, kid=f"made-up-{n}")))
    assert verifier.reads == 2  # the first read, then one re-read for the whole storm

    write_jwks(jwks_file, public_jwk(rsa_key, "rsa-1"), public_jwk(other_rsa_key, "rsa-2"))
    rotated = sign(other_rsa_key, kid="rsa-2")
    clock.now += 29
    assert refused(auth, bearer(rotated)).reason == "unknown_key"
    assert verifier.reads == 2

    clock.now += 1
    assert auth.authenticate(bearer(rotated)).subject == "alice"
    assert verifier.reads == 3


def test_a_key_withdrawn_from_the_jwks_stops_verifying_once_the_set_is_stale(
    auth: Authenticator,
    verifier: JwtVerifier,
    jwks_file: Path,
    clock: Clock,
    rsa_key: rsa.RSAPrivateKey,
    ec_key: ec.EllipticCurvePrivateKey,
) -> None:
    token = sign(rsa_key)
    auth.authenticate(bearer(token))
    write_jwks(jwks_file, public_jwk(ec_key, "ec-1"))

    clock.now += verifier.config.max_age_s - 1
    assert auth.authenticate(bearer(token)).subject == "alice"
    clock.now += 1

    assert refused(auth, bearer(token)).reason == "unknown_key"


def test_a_re_read_that_fails_keeps_the_keys_held(
    auth: Authenticator,
    verifier: JwtVerifier,
    jwks_file: Path,
    clock: Clock,
    rsa_key: rsa.RSAPrivateKey,
) -> None:
    token = sign(rsa_key)
    auth.authenticate(bearer(token))
    jwks_file.write_text("{not json")
    clock.now += verifier.config.max_age_s

    assert auth.authenticate(bearer(token)).subject == "alice"
    assert verifier.reads == 2


def test_an_unreadable_jwks_is_unavailable_and_retried_once_per_interval(
    tmp_path: Path, clock: Clock, rsa_key: rsa.RSAPrivateKey
) -> None:
    path = tmp_path / "absent.json"
    config = JwtConfig(jwks=str(path), issuer=ISSUER, audience=AUDIENCE)
    verifier = JwtVerifier(config, clock=clock)
    token = sign(rsa_key)

    for _ in range(5):
        with pytest.raises(JwksUnavailable, match="JWKS"):
            verifier.verify(token)
    assert verifier.reads == 1

    write_jwks(path, public_jwk(rsa_key, "rsa-1"))
    clock.now += config.refresh_interval_s
    assert verifier.verify(token).subject == "alice"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b" " * (JWKS_MAX_BYTES + 1), "larger than"),
        (b"[" * 100_000, "not JSON"),
        (b'{"keys": {}}', "not a JWK set"),
    ],
)
def test_a_jwks_file_too_large_or_not_a_key_set_is_refused(
    tmp_path: Path, content: bytes, said: str
) -> None:
    path = tmp_path / "jwks.json"
    path.write_bytes(content)
    verifier = JwtVerifier(JwtConfig(jwks=str(path), issuer=ISSUER, audience=AUDIENCE))

    with pytest.raises(JwksUnavailable, match=said):
        verifier.load()


def test_symmetric_and_encryption_keys_of_a_jwks_are_never_held(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    path = tmp_path / "jwks.json"
    secret = {"kty": "oct", "kid": "hmac", "k": b64url(b"0" * 32)}
    write_jwks(path, secret, {**public_jwk(rsa_key, "enc"), "use": "enc"}, {"kty": "RSA"})
    verifier = JwtVerifier(JwtConfig(jwks=str(path), issuer=ISSUER, audience=AUDIENCE))

    assert verifier.load() == 0


def test_the_jwks_must_be_a_path_or_an_https_url_and_algorithms_asymmetric() -> None:
    for jwks in ("http://idp.example.test/jwks", "file:///etc/jwks.json", "https://"):
        with pytest.raises(ValidationError, match="must be https"):
            JwtConfig(jwks=jwks, issuer=ISSUER, audience=AUDIENCE)
    for alg in ("none", "HS256"):
        with pytest.raises(ValidationError, match="only asymmetric"):
            JwtConfig(jwks="jwks.json", issuer=ISSUER, audience=AUDIENCE, algorithms=(alg,))

    assert JwtConfig(jwks="https://idp.example.test/jwks", issuer=ISSUER, audience=AUDIENCE)


def test_an_https_jwks_is_never_followed_to_a_plain_http_url() -> None:
    request = urllib.request.Request("https://idp.example.test/jwks")
    handler = _HttpsRedirectsOnly()

    with pytest.raises(urllib.error.HTTPError, match="refused a redirect"):
        handler.redirect_request(
            request, io.BytesIO(), 302, "Found", HTTPMessage(), "http://idp.example.test/jwks"
        )
    followed = handler.redirect_request(
        request, io.BytesIO(), 302, "Found", HTTPMessage(), "https://keys.example.test/jwks"
    )
    assert followed is not None and followed.full_url == "https://keys.example.test/jwks"


# --- service tokens and the header ---------------------------------------------------------


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer   ", "Basic dXNlcjpwYXNz"])
def test_no_bearer_credential_is_unauthenticated(auth: Authenticator, header: str | None) -> None:
    error = refused(auth, header)

    assert error.reason == "no_credential" and str(error) == "send Authorization: Bearer <token>"


def test_an_unknown_token_is_unauthenticated_without_echoing_it(auth: Authenticator) -> None:
    for guess in ("guessed-token-0123456789abcdef", BOUND[:-1], BOUND + "x", BOUND.upper()):
        error = refused(auth, bearer(guess))
        assert error.reason == "unknown_token" and guess not in str(error) + error.detail
    assert refused(auth, bearer("x" * 9000)).reason == "too_long"


def test_without_a_verifier_a_jwt_is_only_compared_with_the_tokens(
    rsa_key: rsa.RSAPrivateKey,
) -> None:
    auth = Authenticator(bound_tokens({LISTED: ["acme"]}))

    assert refused(auth, bearer(sign(rsa_key))).reason == "unknown_token"


def test_a_bound_token_proves_its_patterns_and_purposes_not_a_subject(
    auth: Authenticator,
) -> None:
    proven = auth.authenticate(f"bearer  {BOUND} ")

    assert proven == Proven(
        kind="token",
        name="rag-app",
        tenants=frozenset({"acme"}),
        principal_patterns=("user:*", "group:eng-*"),
        scopes=None,
        purposes=frozenset({"support"}),
    )


def test_a_bound_token_admits_principals_inside_its_patterns_exactly(
    auth: Authenticator,
) -> None:
    proven = auth.authenticate(bearer(BOUND))

    admitted = admit(proven, "acme", ["user:bob", "group:eng-db", "user:bob"], ["x"], "support")

    assert admitted == Admitted(principals=("group:eng-db", "user:bob"), scopes=("x",))


@pytest.mark.parametrize("outside", ["group:hr", "group:eng", "User:bob", "service:user:x"])
def test_a_bound_token_asserting_a_principal_outside_its_patterns_is_forbidden_naming_it(
    auth: Authenticator, outside: str
) -> None:
    proven = auth.authenticate(bearer(BOUND))

    with pytest.raises(Forbidden) as caught:
        admit(proven, "acme", ["user:bob", outside], None, "support")

    error = caught.value
    assert error.status == 403 and error.field == "principals"
    assert str(error).startswith(f"the credential 'rag-app' may not assert principal {outside!r}:")


@pytest.mark.parametrize("principals", [None, []])
def test_a_bound_token_needs_the_principals_of_the_read(
    auth: Authenticator, principals: list[str] | None
) -> None:
    proven = auth.authenticate(bearer(BOUND))

    with pytest.raises(Invalid) as caught:
        admit(proven, "acme", principals, None, "support")

    assert caught.value.status == 400 and caught.value.field == "principals"


def test_a_purpose_outside_the_tokens_purposes_is_forbidden(auth: Authenticator) -> None:
    proven = auth.authenticate(bearer(BOUND))

    with pytest.raises(Forbidden) as caught:
        admit(proven, "acme", ["user:bob"], None, "marketing")

    assert caught.value.field == "purpose" and "'marketing'" in str(caught.value)


def test_a_list_form_token_admits_any_principal_for_any_purpose_in_its_tenants(
    auth: Authenticator,
) -> None:
    proven = auth.authenticate(bearer(LISTED))

    admitted = admit(proven, "globex", ["group:hr", "anything:at-all"], None, "audit")

    assert admitted == Admitted(principals=("anything:at-all", "group:hr"), scopes=())
    with pytest.raises(Forbidden, match="tenant 'initech'"):
        admit(proven, "initech", ["group:hr"], None, "audit")
    prove_tenant(proven, "acme")
    with pytest.raises(Forbidden, match="tenant 'initech'"):
        prove_tenant(proven, "initech")


def test_a_star_tenant_proves_every_tenant() -> None:
    (token,) = bound_tokens({LISTED: ["acme", "*"]})

    assert token.tenants is None and token.principals == ("*",) and token.purposes is None


# --- JWT subjects --------------------------------------------------------------------------


def test_a_jwt_for_tenant_a_asking_for_tenant_b_is_forbidden(
    auth: Authenticator, rsa_key: rsa.RSAPrivateKey
) -> None:
    proven = auth.authenticate(bearer(sign(rsa_key, tenant="acme")))

    with pytest.raises(Forbidden) as caught:
        admit(proven, "globex", None, None, "support")

    message = str(caught.value)
    assert caught.value.field == "tenant"
    assert "tenant 'globex'" in message and f"'jwt:{ISSUER}' (sub 'alice')" in message


def test_jwt_principals_and_scopes_omitted_are_the_tokens_own(
    auth: Authenticator, rsa_key: rsa.RSAPrivateKey
) -> None:
    proven = auth.authenticate(bearer(sign(rsa_key, groups=["eng", "hr"], scope="b a")))

    admitted = admit(proven, "acme", None, None, "support")

    assert admitted == Admitted(
        principals=("group:eng", "group:hr", "user:alice"), scopes=("a", "b")
    )


def test_jwt_principals_and_scopes_may_be_a_subset_of_the_tokens(
    auth: Authenticator, rsa_key: rsa.RSAPrivateKey
) -> None:
    proven = auth.authenticate(bearer(sign(rsa_key, groups=["eng", "hr"], scope="a b")))

    admitted = admit(proven, "acme", ["group:eng"], [], "support")

    assert admitted == Admitted(principals=("group:eng",), scopes=())


@pytest.mark.parametrize(
    ("principals", "scopes", "named", "field"),
    [
        (["user:alice", "group:hr"], None, "principal 'group:hr'", "principals"),
        (["user:bob"], None, "principal 'user:bob'", "principals"),
        (None, ["docs.read", "admin"], "scope 'admin'", "scopes"),
    ],
)
def test_jwt_principals_or_scopes_beyond_the_tokens_are_forbidden_naming_them(
    auth: Authenticator,
    rsa_key: rsa.RSAPrivateKey,
    principals: list[str] | None,
    scopes: list[str] | None,
    named: str,
    field: str,
) -> None:
    proven = auth.authenticate(bearer(sign(rsa_key, groups=["eng"])))

    with pytest.raises(Forbidden) as caught:
        admit(proven, "acme", principals, scopes, "support")

    assert caught.value.field == field
    assert named in str(caught.value) and "(sub 'alice')" in str(caught.value)


def test_a_jwt_asking_for_no_principals_at_all_is_invalid(
    auth: Authenticator, rsa_key: rsa.RSAPrivateKey
) -> None:
    proven = auth.authenticate(bearer(sign(rsa_key)))

    with pytest.raises(Invalid):
        admit(proven, "acme", [], None, "support")


# --- the setting ---------------------------------------------------------------------------


def test_token_names_never_contain_the_token() -> None:
    tokens = bound_tokens({LISTED: ["acme"], BOUND: {"tenants": ["acme"], "principals": ["*"]}})

    for token in tokens:
        assert token.name == default_token_name(token.token)
        assert token.name.startswith("token-") and len(token.name) == len("token-") + 6
        assert token.token not in token.name and token.token not in repr(token)
    assert default_token_name(LISTED) == "token-" + hashlib.sha256(LISTED.encode()).hexdigest()[:6]


def test_a_name_that_contains_the_token_is_refused() -> None:
    with pytest.raises(TokenSettingsError, match="contains the token") as caught:
        bound_tokens({BOUND: {"name": f"x{BOUND}", "tenants": ["a"], "principals": ["*"]}})

    assert BOUND not in str(caught.value)


@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("", "empty token"),
        ("short-token-123", "15 characters"),
        ("with space 0123456789", "whitespace"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl", "shaped like a JWT"),
    ],
)
def test_unusable_tokens_are_refused_naming_the_entry_not_the_token(token: str, said: str) -> None:
    value = {"name": "rag-app", "tenants": ["acme"], "principals": ["user:*"]}

    with pytest.raises(TokenSettingsError, match=said) as caught:
        bound_tokens({token: value})

    assert "entry 'rag-app'" in str(caught.value)
    assert not token or token not in str(caught.value)


def test_a_list_form_entry_is_named_by_its_hash_in_messages() -> None:
    with pytest.raises(TokenSettingsError) as caught:
        bound_tokens({LISTED: []})

    message = str(caught.value)
    assert f"entry '{default_token_name(LISTED)}'" in message and LISTED not in message


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"name": "rag-app", "tenants": ["acme"], "principals": ["group:[eng"]}, "never closed"),
        ({"name": "rag-app", "tenants": ["acme"], "principals": ["user: x"]}, "principals.0"),
        ({"name": "rag-app", "tenants": ["acme"], "principals": []}, "principals"),
        ({"name": "rag-app", "tenants": ["ac/me"], "principals": ["*"]}, "tenants.0"),
        ({"name": "rag-app", "tenants": ["acme"], "principals": ["*"], "purposes": []}, "purp"),
        ({"name": "rag-app", "tenants": ["acme"], "principals": ["*"], "scopes": ["a"]}, "scopes"),
        ({"name": "rag-app", "tenants": "acme", "principals": ["*"]}, "tenants"),
    ],
)
def test_bad_bindings_are_refused_naming_the_entry_and_the_field(
    value: dict[str, object], said: str
) -> None:
    with pytest.raises(TokenSettingsError, match=said) as caught:
        bound_tokens({BOUND: value})

    assert "entry 'rag-app'" in str(caught.value) and BOUND not in str(caught.value)


def test_a_value_of_neither_form_is_refused() -> None:
    with pytest.raises(TokenSettingsError, match="expected a list of tenants"):
        bound_tokens({BOUND: "acme"})


def test_two_entries_with_one_name_are_refused() -> None:
    value = {"name": "rag-app", "tenants": ["acme"], "principals": ["*"]}

    with pytest.raises(TokenSettingsError, match="two entries are named 'rag-app'"):
        bound_tokens({BOUND: value, LISTED: value})


def test_bracket_classes_are_globs_and_matching_is_case_sensitive() -> None:
    (token,) = bound_tokens({BOUND: {"tenants": ["a"], "principals": ["group:team-[ab]"]}})
    proven = Authenticator([token]).authenticate(bearer(BOUND))

    assert admit(proven, "a", ["group:team-a"], None, "x").principals == ("group:team-a",)
    for outside in ("group:team-c", "GROUP:team-a"):
        with pytest.raises(Forbidden):
            admit(proven, "a", [outside], None, "x")
    assert token == BoundToken(
        "token-" + hashlib.sha256(BOUND.encode()).hexdigest()[:6],
        frozenset({"a"}),
        ("group:team-[ab]",),
        None,
        BOUND,
    )


def test_an_authenticator_needs_a_credential_to_accept() -> None:
    with pytest.raises(ValueError, match="GOVINDEX_READ_TOKENS"):
        Authenticator([])
