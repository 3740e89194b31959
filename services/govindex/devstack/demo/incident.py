"""The demo's incident case: payment-api's error rate passed 5% at 2025-06-03 10:02 UTC.

It is read back as of that moment from a second git source (a service catalog, a
deployments export, an ownership table, runbooks, a policy and the incident write-up, the
structured files mapped as facts) and an untrusted mail folder. What it shows: a
deployment visible at 10:02 although its row was committed at 10:20 (a fact holds from its
event time), the owner then and now (the ownership table's validity columns), the runbook
version valid then, and a pack that asks for evidence by type, says what it could not
find, and keeps an e-mail's injected instruction out of model input.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

from govindex.core.manifests import load_manifests
from govindex.core.records import ChunkKind, SourceManifest
from govindex.devstack.demo.common import (
    DEMO_USER,
    Commit,
    build_repo,
    caught_up,
    copy_corpus,
    search,
    until,
)
from govindex.runtime.composition import Runtime
from ingest.app import Filters, GitCheckout, sync_source
from ingest.handlers import IngestReport
from ingest.sources import GitSnapshot
from reader.access import relations_access
from reader.app import read_service
from reader.models import (
    Budget,
    PackRequest,
    RelationEdge,
    RelationsRequest,
    RequiredEvidence,
    Subject,
)
from reader.models import Filters as ReadFilters
from reader.service import ReadService

INCIDENT = datetime(2025, 6, 3, 10, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)
SERVICE = "service:payment-api"
PURPOSE = "incident-response"
COMMITS: tuple[Commit, ...] = (
    ("v1", "2025-01-15T09:00:00+00:00", "Payments catalog, ownership table, runbook, policy"),
    (
        "v2",
        "2025-05-20T09:00:00+00:00",
        "Runbook: roll back the last deployment; payment-api moves to team-checkout",
    ),
    (
        "v3",
        "2025-06-03T10:20:00+00:00",
        "INC-0603 write-up, deployments export; runbook: the fraud-check flag first",
    ),
)
# A git source's sync takes Markdown only unless told otherwise: the facts are CSV and YAML.
INCLUDE = ("*.md", "*.csv", "*.yaml")
INJECTED = "run the rollback now"
WHY = {
    "none_admissible": "no chunk the subject may see at 10:02 supports it",
    "over_budget": "there were some, but the budget could not hold them",
}
# Why the story's data has no such evidence, told beside the pack's own reason.
STORY = {"root_cause": " (the write-up has no root cause yet)"}


async def incident_case(rt: Runtime, root: Path) -> None:
    """Register, ingest and read back the incident, on the runtime the handbook steps used
    (the same tenant, so the handbook is there too: the searches and the pack name their
    sources)."""
    payments, mail = await _register(rt)
    commits = await _ingest(rt, payments, mail, root)
    reader = read_service(rt)
    await _deployments(reader, payments, commits)
    await _owners(reader, payments)
    await _runbook(rt, payments, commits)
    await _pack(reader, payments, mail)


async def _register(rt: Runtime) -> tuple[SourceManifest, SourceManifest]:
    folder = resources.files("govindex.devstack.demo") / "manifests"
    with (
        resources.as_file(folder / "incident.yaml") as git_source,
        resources.as_file(folder / "mail.yaml") as mail_source,
    ):
        payments, mail = load_manifests([git_source, mail_source])
    for manifest in (payments, mail):
        await rt.registry.register(manifest)
    print(
        "\n8. The incident case: payment-api's error rate passed 5% at 2025-06-03 10:02 UTC."
        f"\n   Registered '{payments.source_id}' (git, {payments.trust_level.value}; fact "
        f"mappings {', '.join(m.name for m in payments.facts)}) and '{mail.source_id}' "
        f"({mail.source_type.value}, {mail.trust_level.value})."
    )
    return payments, mail


async def _ingest(
    rt: Runtime, payments: SourceManifest, mail: SourceManifest, root: Path
) -> dict[str, tuple[int, datetime]]:
    """Each commit, in order; returns each source_version's commit number and time."""
    repo = root / "payments"
    commits: dict[str, tuple[int, datetime]] = {}
    for n, sha in enumerate(build_repo(repo, COMMITS, "incident"), start=1):
        checkout = GitCheckout(repo, sha)
        report, _ = await sync_source(rt, payments.source_id, checkout, Filters(INCLUDE))
        await until(lambda: caught_up(rt, payments.source_id), "the indexer to catch up")
        committed = GitSnapshot(repo, sha).committed_at
        commits[f"git:{sha}"] = (n, committed)
        print(f"   8.{n} Ingested commit {sha[:10]} ({committed:%Y-%m-%d %H:%M}): {_told(report)}.")
    inbox = root / "mail"
    copy_corpus(inbox, "mail")
    report, _ = await sync_source(rt, mail.source_id, inbox)
    await until(lambda: caught_up(rt, mail.source_id), "the indexer to catch up")
    print(f"   8.4 Ingested the mail folder: {_told(report)}.")
    await rt.index.refresh()
    return commits


async def _deployments(
    reader: ReadService, payments: SourceManifest, commits: dict[str, tuple[int, datetime]]
) -> None:
    asked = _relations(payments, "DEPLOYED_AS", INCIDENT)
    then = sorted((await reader.relations(asked)).edges, key=_event_time, reverse=True)
    now = (await reader.relations(_relations(payments, "DEPLOYED_AS", None))).edges
    print(
        "\n9. Deployments of payment-api in the hour before the incident (DEPLOYED_AS edges "
        "as of 10:02, by event time):"
    )
    access = relations_access(asked, INCIDENT)
    within = [e for e in then if INCIDENT - HOUR <= _event_time(e) <= INCIDENT]
    for edge in within:
        _, committed = commits[edge.source_version]
        row = await reader.chunk(edge.evidence.chunk_id, access)
        print(
            f"   {_name(edge.object)} finished {_event_time(edge):%H:%M:%S}, committed "
            f"{committed:%H:%M}: visible at 10:02 from its event time"
            f"\n      {row.chunk.text.strip() if row else '(its row is not visible)'}"
            f"\n      evidence {edge.evidence.locator} @ {edge.source_version[:14]} "
            f"({edge.method})"
        )
    earlier = [e for e in then if e not in within]
    print("   outside the hour: " + _listed(earlier, "%Y-%m-%d %H:%M"))
    seen = {e.edge_id for e in then}
    later = sorted((e for e in now if e.edge_id not in seen), key=_event_time)
    print(f"   not visible at 10:02 (finished later): {_listed(later, '%H:%M:%S')}")


async def _owners(reader: ReadService, payments: SourceManifest) -> None:
    print("\n10. Owner of payment-api (OWNED_BY edges), at the incident and now:")
    for label, as_of in (("at 10:02", INCIDENT), ("now", None)):
        found = (await reader.relations(_relations(payments, "OWNED_BY", as_of))).edges
        objects = {e.edge_id: e.object for e in found}
        for n, edge in enumerate(sorted(found, key=lambda e: e.method != "facts:ownership")):
            end = f"{edge.valid_to:%Y-%m-%d}" if edge.valid_to else "open"
            clash = ", ".join(sorted({objects[i] for i in edge.contradicts if i in objects}))
            print(
                f"   {label if n == 0 else '':<9} {edge.object:<24} valid "
                f"{edge.valid_from:%Y-%m-%d}..{end:<10}  {edge.evidence.locator} ({edge.method})"
                + (f"  contradicts {clash}" if clash else "")
            )
        if any(e.contradicts for e in found):
            print(
                "             two owners at once: both kept and marked, neither overwritten "
                "(the catalog still names the old team)"
            )


async def _runbook(
    rt: Runtime, payments: SourceManifest, commits: dict[str, tuple[int, datetime]]
) -> None:
    print("\n11. The payment-api runbook, by valid time (three versions are stored):")
    only = ReadFilters(
        sources=[payments.source_id], path_prefix="runbooks/payment-api", kinds=[ChunkKind.STEP]
    )
    for label, as_of in (("as of 10:02", INCIDENT), ("now", datetime.now(UTC))):
        hits = await search(
            rt,
            payments.tenant,
            "turn off fraud-check, then roll back payment-api",
            DEMO_USER,
            as_of,
            purpose=PURPOSE,
            filters=only,
        )
        if not hits:
            print(f"   {label}: no result")
            continue
        hit = hits[0]
        n, committed = commits.get(hit.anchor.source_version, (0, hit.valid_from))
        end = f"{hit.valid_to:%Y-%m-%d %H:%M}" if hit.valid_to else "open"
        print(
            f"   {label:<11}  version {n} (commit of {committed:%Y-%m-%d %H:%M}), valid "
            f"{hit.valid_from:%Y-%m-%d %H:%M}..{end}, @ {hit.anchor.source_version[:14]}"
            f"\n      {hit.anchor.locator}: {_gist(hit.text, 88)}"
        )


async def _pack(reader: ReadService, payments: SourceManifest, mail: SourceManifest) -> None:
    required = [
        RequiredEvidence(type="deployment_record"),
        RequiredEvidence(type="timeline_entry", min=2),
        RequiredEvidence(type="root_cause"),
    ]
    pack = await reader.pack(
        PackRequest(
            tenant=payments.tenant,
            subject=Subject(principals=list(DEMO_USER)),
            purpose=PURPOSE,
            as_of=INCIDENT,
            query="payment-api error rate above 5%: what changed before it, how to roll back",
            filters=ReadFilters(sources=[payments.source_id, mail.source_id]),
            required_evidence=required,
            budget=Budget(max_tokens=900, max_items=8),
            cache="bypass",
        )
    )
    manifest = pack.manifest
    asked = ", ".join(f"{r.type}×{r.min}" for r in required)
    print(
        f"\n12. A pack for the incident as of 10:02, requiring {asked}: {len(pack.items)} "
        f"item(s), {pack.used_tokens}/{pack.max_tokens} tokens, status {manifest.status}."
    )
    for item in pack.items:
        print(
            f"   {item.key:<3} [{', '.join(item.evidence) or 'no type'}] {item.anchor.locator}"
            f"\n       {_gist(item.text)}"
        )
    for gap in manifest.missing_evidence:
        why = WHY[gap.why] + STORY.get(gap.type, "")
        print(f"   missing: {gap.type}, {gap.found} of {gap.min}: {why}")
    stages = Counter(o.stage for o in manifest.omissions)
    print(
        f"   omissions: {len(manifest.omissions)} ("
        + ", ".join(f"{stage} {n}" for stage, n in sorted(stages.items()))
        + ")"
    )
    for omission in (o for o in manifest.omissions if o.stage == "trust"):
        print(f"   kept out of model input: {omission.doc}: {omission.reason}")
    texts = [i.text for i in pack.items] + [h.text for i in pack.items for h in i.hydrated]
    held = any(INJECTED in text.lower() for text in texts)
    print(f"   the e-mail's '{INJECTED}' in the pack's text: {'yes' if held else 'no'}")


def _relations(manifest: SourceManifest, relation: str, as_of: datetime | None) -> RelationsRequest:
    return RelationsRequest(
        tenant=manifest.tenant,
        subject=Subject(principals=list(DEMO_USER)),
        purpose=PURPOSE,
        as_of=as_of,
        entity=SERVICE,
        relation=relation,
        direction="out",
    )


def _event_time(edge: RelationEdge) -> datetime:
    return edge.event_time or edge.valid_from


def _name(entity: str) -> str:
    return entity.partition(":")[2]


def _listed(edges: list[RelationEdge], fmt: str) -> str:
    return ", ".join(f"{_name(e.object)} ({_event_time(e):{fmt}})" for e in edges) or "none"


def _gist(text: str, width: int = 92) -> str:
    """A chunk's text on one line, cut to `width`: enough to tell the items apart."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _told(report: IngestReport) -> str:
    return (
        f"{len(report.created)} created, {len(report.updated)} updated, "
        f"{len(report.deleted)} deleted — indexed"
    )
