"""Async Kafka producer for workers (outbox relay, dead letters): exact bytes and headers."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from govindex.core.envelope import KafkaRecord
from govindex.core.errors import TransientError


class AsyncKafkaPublisher:
    def __init__(self, bootstrap: str) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", client_id="govindex-worker"
        )

    async def start(self) -> None:
        try:
            await self._producer.start()
        except KafkaError as exc:
            raise TransientError(f"cannot reach Kafka: {exc}") from exc

    async def stop(self) -> None:
        await self._producer.stop()

    async def publish(self, topic: str, record: KafkaRecord) -> None:
        """Send and wait for the broker's acknowledgement."""
        try:
            await self._producer.send_and_wait(
                topic, value=record.value, key=record.key, headers=record.headers
            )
        except KafkaError as exc:
            raise TransientError(f"Kafka did not take a record for {topic}: {exc}") from exc
