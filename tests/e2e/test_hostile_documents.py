"""docs/design/guarantees.md#hostile-input-stays-small through the real pipeline and CLI: a YAML
alias bomb is refused once, with its
reason, stores nothing, and blocks nothing behind it; the CLI's error stays small."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiokafka.partitioner import murmur2

from govindex.core.deadletters import ERROR_HEADER, REASON_HEADER
from tests.support.pipeline import V1, Pipeline, event_id_of, read_topic
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e


def laughs(levels: int, last: str) -> str:
    """A billion laughs: each level lists ten aliases of the one before (×10 per level)."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*{previous}"] * 10) + "]")
        previous = f"l{level}"
    return "\n".join([*lines, f"{last}: *{previous}"]) + "\n"


BOMB_DOC = f"---\ntitle: Quarterly plan\n{laughs(5, 'classification')}---\n# Plan\nSecret plan.\n"


def partition_of(p: Pipeline, doc_id: str) -> int:
    """Where the producer (Kafka's default partitioner) puts a document's events."""
    key = f"{p.tenant}/{p.source}/{doc_id}".encode()
    return int(murmur2(key) & 0x7FFFFFFF) % p.settings.partitions


async def letters_with(p: Pipeline, reason: bytes, count: int) -> list[Any]:
    for _ in range(100):
        found = [r for r in p.dead_letters() if dict(r.headers).get(REASON_HEADER) == reason]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.2)
    raise AssertionError(f"expected {count} dead letters with reason {reason!r}")


async def test_an_alias_bomb_in_frontmatter_is_dead_lettered_once_and_blocks_nothing_behind_it(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    bomb_partition = partition_of(p, "plan.md")
    healthy_id = next(
        f"after-{n}.md" for n in range(100) if partition_of(p, f"after-{n}.md") == bomb_partition
    )
    bomb, healthy = p.change("plan.md", 1, BOMB_DOC), p.change(healthy_id, 1, V1)
    p.publish(bomb, healthy)
    await p.wait_processed([event_id_of(healthy)])

    assert p.settings.kafka_bootstrap
    sent = read_topic(p.settings.kafka_bootstrap, p.settings.topics.documents)
    assert {r.partition for r in sent} == {bomb_partition}  # the healthy one came after it
    assert len(await p.pg_chunks(healthy_id)) == 2
    await p.assert_sinks_agree()

    (letter,) = await letters_with(p, b"invalid_frontmatter", 1)
    headers = dict(letter.headers)
    assert headers["ce_id"].decode() == event_id_of(bomb)
    error = headers[ERROR_HEADER]
    assert b"anchors and aliases" in error and len(error) < 1000
    assert await p.pg_chunks("plan.md") == [] and p.os_chunks("plan.md") == []
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT reason FROM dead_lettered WHERE consumer = 'indexer' AND event_id = %s",
            (event_id_of(bomb),),
        )
        assert await cur.fetchall() == [("invalid_frontmatter",)]
        cur = await conn.execute(
            "SELECT count(*) FROM documents WHERE tenant_id = %s AND doc_id = 'plan.md'",
            (p.tenant,),
        )
        assert await cur.fetchone() == (0,)

    # Dead-lettered once, never redelivered: a later event is processed and nothing more
    # arrives on the dead-letter topic.
    marker = p.change("marker.md", 1, V1)
    await p.wait_processed(p.publish(marker))
    assert len(await letters_with(p, b"invalid_frontmatter", 1)) == 1


MANIFEST_BOMB = (
    "source_id: s\ntenant: t\nsource_type: git\nclassification: internal\n"
    "allowed_purposes: [x]\ntrust_level: reviewed\n" + laughs(5, "owner_team")
)


@pytest.mark.parametrize("check", [["--check"], []])
def test_source_apply_on_an_alias_bomb_manifest_fails_in_a_few_lines(
    tmp_path: Path, check: list[str]
) -> None:
    assert 380 <= len(MANIFEST_BOMB) <= 460
    (tmp_path / "bomb.yaml").write_text(MANIFEST_BOMB)
    done = govindex(tmp_path, "source", "apply", *check, "bomb.yaml", check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1
    assert len(output) < 2048
    assert "bomb.yaml: not valid YAML: YAML anchors and aliases" in output
