"""The purge's read-back and sweep on the real server, with groups of many documents.

A group of purges can be a thousand documents. The read-back and the sweep used to send a
clause per document, each evaluated over the whole index (and OpenSearch refuses a query
of more than 1,024 clauses): they now send a `terms` per source and sequence.
"""

from __future__ import annotations

import pytest

from govindex.adapters.opensearch import OpenSearchIndex
from govindex.adapters.opensearch.purge import SWEEP_GROUPS, exact_queries
from govindex.control.bootstrap import prepare
from govindex.core.ports import PurgeTarget
from govindex.core.records import Chunk
from govindex.core.settings import Settings
from tests.support.builders import manifest, unique, version_plan

pytestmark = pytest.mark.integration


async def test_a_sweep_of_many_documents_takes_each_ones_versions_and_nothing_later(
    settings: Settings,
) -> None:
    """250 documents at 250 different sequences (two sweep requests), and one re-created
    after its deletion: the sweep removes every target's versions up to its sequence and
    leaves the re-created document's later version; the read-back counts each exactly."""
    assert settings.opensearch_url
    await prepare(settings)
    source = manifest(unique("s"), unique("t"))
    plans = {
        f"d{n}.md": version_plan(source, f"d{n}.md", n + 1, f"# D{n}\nwords\n") for n in range(250)
    }
    old = version_plan(source, "reborn.md", 1, "# Reborn\nold words\n")
    new = version_plan(source, "reborn.md", 3, "# Reborn\nnew words\n")
    chunks: list[Chunk] = [c for p in (*plans.values(), old, new) for c in p.chunks]
    tenant, source_id = source.tenant, source.source_id
    targets = [
        *(PurgeTarget(tenant, source_id, d, p.sequence, ()) for d, p in plans.items()),
        PurgeTarget(tenant, source_id, "reborn.md", 2, ()),
    ]
    assert len(exact_queries(targets)) > SWEEP_GROUPS
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
    try:
        result = await index.project(chunks)
        assert (result.taken, dict(result.rejected)) == (len(chunks), {})
        await index.refresh()
        expected = [*(len(p.chunks) for p in plans.values()), len(old.chunks)]
        assert await index.count_documents(targets) == expected

        assert await index.sweep_documents(targets) == sum(expected)
        assert await index.count_documents(targets) == [0] * len(targets)
        later = PurgeTarget(tenant, source_id, "reborn.md", 3, ())
        assert await index.count_documents([later]) == [len(new.chunks)]
    finally:
        await index.close()


async def test_the_read_back_counts_only_the_targets_source_when_names_are_shared(
    settings: Settings,
) -> None:
    """The read-back first asks whether any document anywhere bears a target's name (one
    `terms` lookup); a README.md of another source and tenant makes it ask exactly, and the
    target's own count stays its own."""
    assert settings.opensearch_url
    await prepare(settings)
    ours, theirs = manifest(unique("s"), unique("t")), manifest(unique("s"), unique("t"))
    kept = version_plan(theirs, "README.md", 1, "# Readme\ntheir words\n")
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
    try:
        assert (await index.project(list(kept.chunks))).taken == len(kept.chunks)
        await index.refresh()
        shared = PurgeTarget(ours.tenant, ours.source_id, "README.md", 1, ())
        nowhere = PurgeTarget(ours.tenant, ours.source_id, unique("nowhere") + ".md", 1, ())
        theirs_target = PurgeTarget(theirs.tenant, theirs.source_id, "README.md", 1, ())
        assert await index.count_documents([shared, nowhere]) == [0, 0]
        assert await index.count_documents([shared, theirs_target]) == [0, len(kept.chunks)]
    finally:
        await index.close()
