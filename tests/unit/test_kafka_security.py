"""Kafka and OpenSearch security settings: what is refused, the exact options each client
library receives, and that every client the adapters build gets them (built, not
connected: aiokafka connects on `start()`)."""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import govindex.adapters.kafka as sync_kafka
import govindex.adapters.kafka_blocking as kafka_clients
from govindex.adapters.faststream import new_broker
from govindex.adapters.kafka_async import AsyncKafkaPublisher
from govindex.adapters.kafka_lanes import LanePolicy, PartitionLanes
from govindex.adapters.kafka_security import (
    PLAINTEXT,
    FileTokenProvider,
    KafkaSecurity,
    aiokafka_options,
    faststream_options,
)
from govindex.adapters.opensearch import OpenSearchIndex, OpenSearchSecurity
from govindex.adapters.opensearch.client import MissingAwsExtra, client_options
from govindex.core.errors import TransientError
from govindex.core.settings import Settings

SERVICES = Path(__file__).resolve().parents[2] / "services"
# An unused loopback port: clients built against it never reach anything.
NOWHERE = "127.0.0.1:9"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("GOVINDEX_"):
            monkeypatch.delenv(key)


@pytest.fixture
def pem(tmp_path: Path) -> Path:
    """A real CA certificate (the system's first) for building SSL contexts."""
    path = tmp_path / "ca.pem"
    found = ssl.get_default_verify_paths().cafile
    if found and Path(found).is_file():
        path.write_text(Path(found).read_text())
    else:  # pragma: no cover - every CI image has a CA bundle
        pytest.skip("no system CA bundle to load")
    return path


def settings(**kw: Any) -> Settings:
    return Settings(**kw)


# --- settings validation -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"kafka_security_protocol": "SASL_SSL"}, "needs GOVINDEX_KAFKA_SASL_MECHANISM"),
        (
            {"kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_mechanism": "PLAIN"},
            "PLAIN needs GOVINDEX_KAFKA_SASL_USERNAME and GOVINDEX_KAFKA_SASL_PASSWORD",
        ),
        (
            {
                "kafka_security_protocol": "SASL_SSL",
                "kafka_sasl_mechanism": "SCRAM-SHA-512",
                "kafka_sasl_username": "u",
            },
            "SCRAM-SHA-512 needs GOVINDEX_KAFKA_SASL_USERNAME",
        ),
        (
            {"kafka_security_protocol": "SASL_SSL", "kafka_sasl_mechanism": "OAUTHBEARER"},
            "OAUTHBEARER needs GOVINDEX_KAFKA_SASL_OAUTH_TOKEN_FILE",
        ),
        ({"kafka_sasl_mechanism": "PLAIN"}, "uses no SASL"),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_certfile": "/dev/null"},
            "GOVINDEX_KAFKA_SSL_CERTFILE and GOVINDEX_KAFKA_SSL_KEYFILE go together",
        ),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_cafile": "/nonexistent/ca.pem"},
            "GOVINDEX_KAFKA_SSL_CAFILE='/nonexistent/ca.pem' is not a readable file",
        ),
        (
            {
                "kafka_security_protocol": "SASL_SSL",
                "kafka_sasl_mechanism": "OAUTHBEARER",
                "kafka_sasl_oauth_token_file": "/nonexistent/token",
            },
            "GOVINDEX_KAFKA_SASL_OAUTH_TOKEN_FILE='/nonexistent/token' is not a readable file",
        ),
        ({"kafka_security_protocol": "TLS"}, "kafka_security_protocol"),
        (
            {"opensearch_username": "admin"},
            "GOVINDEX_OPENSEARCH_USERNAME and GOVINDEX_OPENSEARCH_PASSWORD",
        ),
        ({"opensearch_client_cert": "/dev/null"}, "GOVINDEX_OPENSEARCH_CLIENT_KEY go together"),
        (
            {"opensearch_ca_file": "/nonexistent/os-ca.pem"},
            "'/nonexistent/os-ca.pem' is not a readable file",
        ),
        (
            {"opensearch_aws_sigv4": True},
            "GOVINDEX_OPENSEARCH_AWS_SIGV4 needs GOVINDEX_OPENSEARCH_AWS_REGION",
        ),
        (
            {
                "opensearch_aws_sigv4": True,
                "opensearch_aws_region": "eu-west-1",
                "opensearch_username": "u",
                "opensearch_password": "p",
            },
            "exclude each other",
        ),
        ({"pg_pool_size": 2, "pg_pool_min": 3}, "GOVINDEX_PG_POOL_MIN=3 is more than"),
    ],
)
def test_inconsistent_settings_are_refused(kw: dict[str, Any], said: str) -> None:
    with pytest.raises(ValidationError) as raised:
        settings(**kw)
    assert said in str(raised.value)


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("abc\n")
    monkeypatch.setenv("GOVINDEX_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("GOVINDEX_KAFKA_SASL_MECHANISM", "OAUTHBEARER")
    monkeypatch.setenv("GOVINDEX_KAFKA_SASL_OAUTH_TOKEN_FILE", str(token))
    monkeypatch.setenv("GOVINDEX_PG_POOL_SIZE", "20")
    s = Settings()
    sec = KafkaSecurity.from_settings(s)
    assert (sec.protocol, sec.sasl_mechanism, sec.oauth_token_file) == (
        "SASL_SSL",
        "OAUTHBEARER",
        token,
    )
    assert s.pg_pool_size == 20
    assert s.pg_pool_min == 1


def test_every_new_setting_is_described() -> None:
    prefixes = ("kafka_s", "opensearch_", "pg_pool")
    fields = {
        n: f
        for n, f in Settings.model_fields.items()
        if n.startswith(prefixes) and n != "opensearch_url"
    }
    assert len(fields) == 21
    assert [n for n, f in fields.items() if not f.description] == []
    token_file = fields["kafka_sasl_oauth_token_file"].description or ""
    assert "Kubernetes" in token_file and "read again" in token_file


def test_secrets_stay_out_of_repr() -> None:
    sec = KafkaSecurity(
        protocol="SASL_SSL", sasl_mechanism="PLAIN", username="u", password="hunter2"
    )
    assert "hunter2" not in repr(sec)
    s = settings(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="PLAIN",
        kafka_sasl_username="u",
        kafka_sasl_password="hunter2",
    )
    assert "hunter2" not in repr(s)
    assert KafkaSecurity.from_settings(s).password == "hunter2"


# --- the option builders ---------------------------------------------------------------


def test_plaintext_options() -> None:
    assert aiokafka_options(PLAINTEXT) == {"security_protocol": "PLAINTEXT"}
    assert faststream_options(PLAINTEXT) == {"security": None}


def test_ssl_options(pem: Path) -> None:
    sec = KafkaSecurity(protocol="SSL", cafile=pem, check_hostname=False)
    a = aiokafka_options(sec)
    assert set(a) == {"security_protocol", "ssl_context"}
    assert a["security_protocol"] == "SSL"
    context = a["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and not context.check_hostname
    f = faststream_options(sec)["security"]
    assert type(f).__name__ == "BaseSecurity" and f.use_ssl
    assert isinstance(f.ssl_context, ssl.SSLContext)
    assert aiokafka_options(KafkaSecurity(protocol="SSL", cafile=pem))["ssl_context"].check_hostname


@pytest.mark.parametrize(
    ("mechanism", "faststream_class"),
    [
        ("PLAIN", "SASLPlaintext"),
        ("SCRAM-SHA-256", "SASLScram256"),
        ("SCRAM-SHA-512", "SASLScram512"),
    ],
)
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_password_options(
    mechanism: Any, faststream_class: str, protocol: Any, pem: Path
) -> None:
    cafile = pem if protocol == "SASL_SSL" else None
    sec = KafkaSecurity(
        protocol=protocol, sasl_mechanism=mechanism, username="svc", password="pw", cafile=cafile
    )
    a = aiokafka_options(sec)
    assert {k: v for k, v in a.items() if k != "ssl_context"} == {
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "svc",
        "sasl_plain_password": "pw",
    }
    assert ("ssl_context" in a) == (protocol == "SASL_SSL")
    f = faststream_options(sec)["security"]
    assert type(f).__name__ == faststream_class
    assert (f.username, f.password, f.use_ssl) == ("svc", "pw", protocol == "SASL_SSL")


async def test_oauthbearer_reads_the_token_file_each_time(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    sec = KafkaSecurity(
        protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER", oauth_token_file=token
    )
    a = aiokafka_options(sec)
    provider = a["sasl_oauth_token_provider"]
    assert isinstance(provider, FileTokenProvider)
    assert a["sasl_mechanism"] == "OAUTHBEARER" and "sasl_plain_username" not in a
    f = faststream_options(sec)
    assert type(f["security"]).__name__ == "SASLOAuthBearer"
    fs_provider = f["sasl_oauth_token_provider"]
    assert isinstance(fs_provider, FileTokenProvider)
    assert await provider.token() == "first" and await fs_provider.token() == "first"
    token.write_text("rotated")  # the kubelet rewrote the projected token
    assert await provider.token() == "rotated" and await fs_provider.token() == "rotated"
    token.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        await provider.token()


# --- every client the adapters build gets them -----------------------------------------


def sasl_ssl(pem: Path) -> KafkaSecurity:
    return KafkaSecurity(
        protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        username="svc",
        password="pw",
        cafile=pem,
    )


def assert_aiokafka(client: Any) -> None:
    inner = getattr(client, "_client", None) or client.client  # consumer, producer
    assert inner._security_protocol == "SASL_SSL"
    assert inner._sasl_mechanism == "SCRAM-SHA-512"
    assert (inner._sasl_plain_username, inner._sasl_plain_password) == ("svc", "pw")
    assert isinstance(inner._ssl_context, ssl.SSLContext)


def test_blocking_clients_get_the_options(pem: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every aiokafka client the blocking adapters build (admin, consumers, producer) is
    built for real with the options, through a spy that keeps it and skips `start()`; the
    clients built on demand (the lag's admin, `commit_as_member`'s group consumer) come
    from the same builders as those of `GroupOffsets`, and are reached here too."""
    sec = sasl_ssl(pem)
    seen: list[tuple[str, dict[str, Any], Any]] = []

    def spy(real: Any) -> Any:
        def build(**kw: Any) -> Any:
            client = real(**kw)
            seen.append((real.__name__, kw, client))

            async def not_connected() -> None:
                return None

            client.start = not_connected
            return client

        return build

    for name in ("AIOKafkaAdminClient", "AIOKafkaConsumer", "AIOKafkaProducer"):
        monkeypatch.setattr(kafka_clients, name, spy(getattr(kafka_clients, name)))
    with pytest.raises(TransientError):  # no broker to list the topics of
        sync_kafka.ensure_topics(NOWHERE, ["t"], 1, sec)
    keeper = sync_kafka.TopicKeeper(NOWHERE, sec)
    with pytest.raises(TransientError):
        keeper.states(["t"])
    sync_kafka.KafkaEventPublisher(NOWHERE, sec).close()
    sync_kafka.OffsetReader(NOWHERE, sec).close()
    sync_kafka.TopicScanner(NOWHERE, sec).close()
    offsets = sync_kafka.GroupOffsets(NOWHERE, sec)
    with pytest.raises(TransientError):  # never assigned: it gives up
        offsets.commit_as_member("g", "t", {0: 1}, timeout_s=0.01)
    offsets.close()
    names = [n for n, _, _ in seen]
    assert names.count("AIOKafkaAdminClient") == 3  # ensure_topics, TopicKeeper, GroupOffsets
    assert names.count("AIOKafkaProducer") == 1
    assert names.count("AIOKafkaConsumer") == 4  # reader, scanner, offsets, offsets' member
    for _, kw, client in seen:
        assert kw["security_protocol"] == "SASL_SSL"
        assert_aiokafka(client)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "OAUTHBEARER"])
def test_aiokafka_really_takes_the_names(mechanism: Any, pem: Path) -> None:
    """The option names are aiokafka's: every one is a keyword of each client's
    constructor (an unknown name would raise TypeError)."""
    import inspect

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient

    sec = KafkaSecurity(
        protocol="SASL_SSL",
        sasl_mechanism=mechanism,
        username="svc",
        password="pw",
        oauth_token_file=pem,
        cafile=pem,  # the client certificate and key go into the SSL context, not names
    )
    names = set(aiokafka_options(sec))
    assert len(names) >= 4
    for client in (AIOKafkaAdminClient, AIOKafkaConsumer, AIOKafkaProducer):
        assert names <= set(inspect.signature(client).parameters), client


async def test_aiokafka_clients_get_the_options(pem: Path) -> None:
    sec = sasl_ssl(pem)
    publisher = AsyncKafkaPublisher(NOWHERE, sec)
    assert_aiokafka(publisher._producer)

    async def on_batch(batch: Any) -> None:
        return None

    lanes = PartitionLanes(
        NOWHERE,
        topic="t",
        group_id="g",
        client_id="c",
        on_batch=on_batch,
        policy=LanePolicy(),
        security=sec,
    )
    assert_aiokafka(lanes._consumer)


async def test_faststream_broker_gets_the_options(pem: Path) -> None:
    broker = new_broker(NOWHERE, "c", sasl_ssl(pem))
    options = broker._connection_kwargs  # what its aiokafka producer and consumers receive
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("svc", "pw")
    assert isinstance(options["ssl_context"], ssl.SSLContext)


async def test_defaults_stay_plaintext() -> None:
    """Tests and tools build the adapters with a bootstrap only: PLAINTEXT, as before."""
    consumer_kw = aiokafka_options(PLAINTEXT)
    assert consumer_kw == {"security_protocol": "PLAINTEXT"}
    publisher = AsyncKafkaPublisher(NOWHERE)
    assert publisher._producer.client._security_protocol == "PLAINTEXT"
    kwargs = new_broker(NOWHERE, "c")._connection_kwargs
    assert kwargs.get("security_protocol", "PLAINTEXT") == "PLAINTEXT"
    assert "sasl_mechanism" not in kwargs


# --- OpenSearch ---------------------------------------------------------------------


def test_opensearch_options(pem: Path) -> None:
    sec = OpenSearchSecurity(
        username="admin", password="pw", ca_file=pem, client_cert=pem, client_key=pem
    )
    url, options = client_options("https://old:secret@search.example:9200", sec)
    assert url == "https://search.example:9200"  # settings' credentials replace the URL's
    assert options == {
        "verify_certs": True,
        "ca_certs": str(pem),
        "client_cert": str(pem),
        "client_key": str(pem),
        "http_auth": ("admin", "pw"),
    }
    url, options = client_options("http://u:p@localhost:9200", OpenSearchSecurity())
    assert url == "http://u:p@localhost:9200" and options == {"verify_certs": True}
    _, options = client_options("https://h", OpenSearchSecurity(verify_certs=False))
    assert options == {"verify_certs": False, "ssl_show_warn": False}


def test_opensearch_index_gets_the_options(pem: Path) -> None:
    index = OpenSearchIndex(
        "https://search.example:9200",
        "a",
        security=OpenSearchSecurity(username="admin", password="pw", ca_file=pem),
    )
    transport = index._client.transport  # its connections are made on first use
    assert transport.hosts == [{"host": "search.example", "port": 9200, "use_ssl": True}]
    assert transport.kwargs["http_auth"] == ("admin", "pw")
    assert transport.kwargs["ca_certs"] == str(pem)
    assert transport.kwargs["verify_certs"] is True


def test_sigv4_without_botocore_names_the_extra() -> None:
    try:
        import botocore  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover
        pytest.skip("botocore is installed")
    sec = OpenSearchSecurity(aws_sigv4=True, aws_region="eu-west-1")
    with pytest.raises(MissingAwsExtra, match=re.escape("pip install 'govindex[aws]'")):
        client_options("https://search.example", sec)


# --- no client built without the security options ----------------------------------


CONSTRUCTORS = re.compile(
    r"\b(KafkaAdminClient|KafkaConsumer|KafkaProducer|AIOKafkaAdminClient|AIOKafkaProducer|"
    r"AIOKafkaConsumer|"
    r"KafkaBroker|AsyncOpenSearch|OpenSearch)\("
)
MARKERS = ("aiokafka_options(", "faststream_options(", "**options")


def test_no_client_is_built_without_the_security_options() -> None:
    """Every client constructor under services/ passes the security options, so a client
    added later cannot forget them (OpenSearch clients come from `new_client` only)."""
    offenders = []
    for path in sorted(SERVICES.rglob("*.py")):
        text = path.read_text()
        for match in CONSTRUCTORS.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            if text[: match.start()].rstrip().endswith(("class", "def")):
                continue
            depth, end = 0, match.end() - 1
            for end in range(match.end() - 1, len(text)):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
            call = text[match.start() : end + 1]
            if not any(marker in call for marker in MARKERS):
                offenders.append(f"{path.relative_to(SERVICES)}:{line}: {call.splitlines()[0]}")
    assert offenders == []
