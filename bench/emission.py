"""What content by reference costs a connector: events with a claim-check blob against the
same events carrying their content inline, through the same durable outbox, same run."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from govindex.adapters.postgres.pool import migrate
from govindex.core import events
from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex
from govindex.core.logs import configure_logging
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.composition import Runtime
from ingest.handlers import BATCH, document_message

DOCS = 3000
BODY = "Restart the service, check the replica lag, then promote the standby. " * 30


def _payload(n: int, by_reference: bool) -> tuple[DocumentChanged, str]:
    text = f"# Runbook {n}\n\n{BODY}{n}\n"
    digest = sha256_hex(text)
    return (
        DocumentChanged(
            tenant_id="bench",
            source_id="bench",
            doc_id=f"d{n}.md",
            source_version=f"v{n}",
            sequence=1,
            observed_at=datetime.now(UTC),
            content_hash=digest,
            content=None if by_reference else text,
            content_ref=digest if by_reference else None,
        ),
        text,
    )


async def _emit(rt: Runtime, by_reference: bool, offset: int) -> float:
    started = time.perf_counter()
    for start in range(0, DOCS, BATCH):
        async with rt.ingest_state.transaction() as tx:
            messages, blobs = [], []
            for n in range(offset + start, offset + min(start + BATCH, DOCS)):
                payload, text = _payload(n, by_reference)
                if by_reference:
                    blobs.append((payload.content_hash, text))
                messages.append(
                    document_message(rt.settings.topics, events.DOCUMENT_CREATED, payload, "c")
                )
            await tx.put_blobs(blobs)  # as ingest does: one statement per batch
            await tx.emit(messages)
    return time.perf_counter() - started


async def main() -> None:
    configure_logging(level="WARNING", json_output=True)
    root = Path(tempfile.mkdtemp(prefix="govindex-bench-"))
    stack = EmbeddedStack(root / "state", namespace="bench", durable=True)
    try:
        settings = Settings(state_dir=root / "state").model_copy(update=stack.start())
        assert settings.pg_dsn
        await migrate(settings.pg_dsn)
        async with Runtime(settings) as rt:
            await _emit(rt, True, 10 * DOCS)  # warm-up
            inline = await _emit(rt, False, 0)
            reference = await _emit(rt, True, DOCS)
        print(f"{DOCS} events of {len(BODY) // 1024 + 1} KiB, batches of {BATCH}, fsync on:")
        print(f"  content inline in the outbox      {inline / DOCS * 1e6:8.0f} us/event")
        print(f"  content by reference (blob row)   {reference / DOCS * 1e6:8.0f} us/event")
        print(f"  by reference / inline             {reference / inline:8.2f}x")
    finally:
        stack.stop(discard=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
