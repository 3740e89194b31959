"""The async Kafka producer of every process (aiokafka): exact bytes and headers, acks=all."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from govindex.adapters.kafka_security import PLAINTEXT, KafkaSecurity, aiokafka_options
from govindex.core.envelope import KafkaRecord
from govindex.core.errors import TransientError


class AsyncKafkaPublisher:
    """Implements EventPublisher. Sends never block the event loop: a large push of
    thousands of events is sent as a batch and acknowledged together."""

    def __init__(
        self,
        bootstrap: str,
        security: KafkaSecurity = PLAINTEXT,
        *,
        client_id: str = "govindex",
    ) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            client_id=client_id,
            max_request_size=8 * 1024 * 1024,
            linger_ms=5,
            **aiokafka_options(security),
        )

    async def start(self) -> None:
        try:
            await self._producer.start()
        except (KafkaError, KeyError) as exc:
            # aiokafka lets a SCRAM refusal (`e=unknown-user`) out as KeyError('v').
            await self._producer.stop()
            raise TransientError(f"cannot reach Kafka: {exc!r}") from exc

    async def stop(self) -> None:
        await self._producer.stop()

    async def publish(self, topic: str, record: KafkaRecord) -> None:
        """Send and wait for the broker's acknowledgement."""
        await self.publish_many(topic, [record])

    async def publish_many(self, topic: str, records: Sequence[KafkaRecord]) -> None:
        """Send every record, then wait until the broker acknowledged all of them.

        Records with the same key keep their order (one partition, one producer).
        """
        try:
            pending = [
                await self._producer.send(
                    topic, value=record.value, key=record.key, headers=record.headers
                )
                for record in records
            ]
            await asyncio.gather(*pending)
        except KafkaError as exc:
            raise TransientError(f"Kafka did not take the records for {topic}: {exc}") from exc
