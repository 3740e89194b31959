"""How every Kafka client reaches the brokers: TLS and SASL, in one place.

`KafkaSecurity` is built once from settings (`KafkaSecurity.from_settings`) and each client
library gets its own spelling of it here: aiokafka (`aiokafka_options`: the lanes, the
async producer, and the blocking admin, offset, scan and producer clients of `kafka`) and
FastStream (`faststream_options`: the event-at-a-time consumers, aiokafka underneath).
Every client the adapters build takes one of these; `PLAINTEXT` is what the embedded
stack and the tests use.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from aiokafka.abc import AbstractTokenProvider as AsyncTokenProvider
from aiokafka.helpers import create_ssl_context

if TYPE_CHECKING:
    from faststream.security import BaseSecurity

    from govindex.core.settings import Settings

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


def read_token(path: Path) -> str:
    """The bearer token in `path`, read again on every call: a projected token (Kubernetes
    service account, workload identity) is rotated in place by the kubelet."""
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"the OAuth token file {path} is empty")
    return token


class FileTokenProvider(AsyncTokenProvider):  # type: ignore[misc]  # untyped base
    """aiokafka's (and FastStream's) OAUTHBEARER token: the file's content, re-read each
    time the client authenticates a connection."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def token(self) -> str:
        return read_token(self.path)


@dataclass(frozen=True)
class KafkaSecurity:
    """TLS and SASL of the Kafka connections (GOVINDEX_KAFKA_SECURITY_PROTOCOL and friends).

    Checked for consistency by `Settings`; secrets are kept out of `repr`."""

    protocol: Protocol = "PLAINTEXT"
    sasl_mechanism: Mechanism | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    oauth_token_file: Path | None = None
    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaSecurity:
        s = settings
        return cls(
            protocol=s.kafka_security_protocol,
            sasl_mechanism=s.kafka_sasl_mechanism,
            username=s.kafka_sasl_username,
            password=None
            if s.kafka_sasl_password is None
            else s.kafka_sasl_password.get_secret_value(),
            oauth_token_file=s.kafka_sasl_oauth_token_file,
            cafile=s.kafka_ssl_cafile,
            certfile=s.kafka_ssl_certfile,
            keyfile=s.kafka_ssl_keyfile,
            key_password=(
                None
                if s.kafka_ssl_key_password is None
                else s.kafka_ssl_key_password.get_secret_value()
            ),
            check_hostname=s.kafka_ssl_check_hostname,
        )

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context of the async clients (None: no TLS). Without a CA file
        the system's CAs verify the brokers (a managed Kafka with a public CA)."""
        if not self.uses_ssl:
            return None
        context: ssl.SSLContext = create_ssl_context(
            cafile=self.cafile,
            certfile=self.certfile,
            keyfile=self.keyfile,
            password=self.key_password,
        )
        context.check_hostname = self.check_hostname
        return context


PLAINTEXT: Final = KafkaSecurity()


def aiokafka_options(security: KafkaSecurity) -> dict[str, Any]:
    """Keyword arguments of `AIOKafkaProducer`, `AIOKafkaConsumer` and `AIOKafkaAdminClient`."""
    options: dict[str, Any] = {"security_protocol": security.protocol}
    if security.uses_ssl:
        options["ssl_context"] = security.ssl_context()
    if security.uses_sasl:
        assert security.sasl_mechanism is not None  # Settings refuse SASL without one
        options["sasl_mechanism"] = security.sasl_mechanism
        if security.sasl_mechanism == "OAUTHBEARER":
            assert security.oauth_token_file is not None
            options["sasl_oauth_token_provider"] = FileTokenProvider(security.oauth_token_file)
        else:
            options["sasl_plain_username"] = security.username
            options["sasl_plain_password"] = security.password
    return options


def faststream_security(security: KafkaSecurity) -> BaseSecurity | None:
    """FastStream's security object (None: PLAINTEXT)."""
    from faststream.security import (
        BaseSecurity,
        SASLOAuthBearer,
        SASLPlaintext,
        SASLScram256,
        SASLScram512,
    )

    if security.protocol == "PLAINTEXT":
        return None
    context = security.ssl_context()
    use_ssl = security.uses_ssl
    if not security.uses_sasl:
        return BaseSecurity(ssl_context=context, use_ssl=use_ssl)
    user, password = security.username or "", security.password or ""
    match security.sasl_mechanism:
        case "PLAIN":
            return SASLPlaintext(user, password, ssl_context=context, use_ssl=use_ssl)
        case "SCRAM-SHA-256":
            return SASLScram256(user, password, ssl_context=context, use_ssl=use_ssl)
        case "SCRAM-SHA-512":
            return SASLScram512(user, password, ssl_context=context, use_ssl=use_ssl)
        case "OAUTHBEARER":
            return SASLOAuthBearer(ssl_context=context, use_ssl=use_ssl)
    raise ValueError(f"{security.protocol} needs a SASL mechanism")


def faststream_options(security: KafkaSecurity) -> dict[str, Any]:
    """Keyword arguments of FastStream's `KafkaBroker`: `security` and, for OAUTHBEARER,
    the token provider (FastStream's security object does not carry one)."""
    options: dict[str, Any] = {"security": faststream_security(security)}
    if security.uses_sasl and security.sasl_mechanism == "OAUTHBEARER":
        assert security.oauth_token_file is not None
        options["sasl_oauth_token_provider"] = FileTokenProvider(security.oauth_token_file)
    return options
