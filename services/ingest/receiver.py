"""The webhook receiver: POST /webhooks/github and /webhooks/gitlab.

A delivery is verified against its source's secret before its payload is read (beyond the
repository's name, which selects the secret); a push is recognised if redelivered, then the
source is synced from its local mirror (`sync_snapshot`): fetch, then diff the branch head
against what was last emitted. The branch head (not the payload's `after`) is what gets
ingested, so deliveries that arrive out of order still converge, a force push brings the
whole tree to its new head and renames become delete + create. The payload's file lists
are never used.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from govindex.core.inputs import has_control, quote
from govindex.core.ports import ConnectorState, Deliveries, SourceCatalog
from govindex.core.records import SourceManifest
from govindex.core.settings import Topics
from ingest.handlers import (
    IngestContext,
    IngestReport,
    SourceView,
    Versions,
    git_versions,
    sync_snapshot,
)
from ingest.mirror import GitMirror
from ingest.sources import GitSnapshot, SourceFile
from ingest.webhooks import (
    REPOSITORY_FIELD,
    Provider,
    WebhookRefused,
    event_kind,
    is_ping,
    is_push,
    parse_push,
    refusal,
    repository_of,
    signed_with,
)

log = structlog.get_logger(__name__)

# What GitHub documents as its own cap on a delivery's payload (GitLab's are smaller); a
# bigger body is refused (413) before any of it is parsed.
MAX_BODY_BYTES = 25 * 1024 * 1024


class EmptySnapshot:
    """A branch that no longer exists: nothing is present, so everything known is deleted."""

    def files(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        among: Collection[str] | None = None,
    ) -> list[SourceFile]:
        return []

    def read(self, files: Sequence[SourceFile]) -> Iterator[tuple[SourceFile, bytes]]:
        return iter(())


@dataclass
class ReceiverPorts:
    sources: SourceCatalog
    state: ConnectorState
    deliveries: Deliveries
    topics: Topics
    mirrors: Path
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def lock(self, source_id: str) -> asyncio.Lock:
        return self._locks.setdefault(source_id, asyncio.Lock())


async def git_view(manifest: SourceManifest, ports: ReceiverPorts) -> SourceView:
    """The branch head of a git source's mirror, fetched now (empty if the branch is gone)."""
    assert manifest.git is not None
    git = manifest.git
    mirror = GitMirror(ports.mirrors, manifest.source_id, git.remote_url)
    await asyncio.to_thread(mirror.fetch)
    head = await asyncio.to_thread(mirror.head, git.branch)
    snapshot: Any
    versions: Versions
    if head is None:
        snapshot, versions = EmptySnapshot(), (lambda files: {})
        observed, deletion_version = datetime.now(UTC), f"branch-deleted:{git.branch}"
    else:
        snapshot = await asyncio.to_thread(GitSnapshot, mirror.path, head)
        versions = git_versions(snapshot)
        observed, deletion_version = snapshot.committed_at, snapshot.source_version
    ctx = IngestContext(
        manifest=manifest,
        topics=ports.topics,
        versions=versions,
        observed_at=observed,
        deletion_version=deletion_version,
        include=tuple(git.include),
        exclude=tuple(git.exclude),
    )
    return SourceView(snapshot, ctx, checkpoint=head or deletion_version)


async def handle_delivery(
    provider: Provider, body: bytes, headers: Mapping[str, str], ports: ReceiverPorts
) -> tuple[int, dict[str, Any]]:
    """What to answer a delivery; never logs the body (it may carry private content).

    The signature is checked before the payload is read beyond its repository's name. Every
    delivery that does not verify, for a registered repository or not, gets the same
    `refusal`; only the log says why.
    """
    repository = repository_of(provider, body)
    if repository is None:
        raise WebhookRefused(
            400,
            f"the payload names no repository ({REPOSITORY_FIELD[provider]} is not a string), "
            "so there is no webhook secret to check it with",
        )
    kind = event_kind(provider, headers)
    where = {"provider": provider, "repository": quote(repository), "kind": quote(kind)}
    # A name with control characters (NUL, which Postgres text refuses, among them) cannot
    # be registered: it is unknown, and refused like any other unknown name.
    known = not has_control(repository)
    manifests = await ports.sources.find_by_repository(repository) if known else []
    verified = _verified(provider, manifests, body, headers)
    if not verified:
        reason = "unknown repository" if not manifests else "signature does not match"
        log.warning("webhook.refused", **where, reason=reason)
        raise refusal(provider)
    if is_ping(provider, headers):
        log.info("webhook.ping", **where, sources=[m.source_id for m in verified])
        return 200, {
            "ok": f"secret OK for repository {quote(repository)}",
            "sources": [m.source_id for m in verified],
        }
    if not is_push(provider, headers):
        return 202, {
            "ignored": f"{provider} event {quote(kind or '(none)')} is not indexed; only pushes are"
        }
    push = parse_push(provider, body, headers)
    where["delivery"] = push.delivery_id
    targets = [m for m in verified if m.git and m.git.branch == push.branch and m.enabled]
    if not targets:
        branch = quote(push.branch) if push.branch is not None else "not a branch"
        log.info("webhook.ignored", **where, branch=branch, reason="branch not indexed")
        return 202, {
            "ignored": f"ref of the push ({branch}) is not the indexed branch of any enabled source"
        }
    if await ports.deliveries.seen(provider, push.delivery_id):
        return 200, {"duplicate": push.delivery_id}
    result: dict[str, Any] = {"delivery": push.delivery_id, "sources": {}}
    for manifest in targets:
        async with ports.lock(manifest.source_id):  # one fetch and sync of a source at a time
            report = await sync_snapshot(await git_view(manifest, ports), state=ports.state)
        result["sources"][manifest.source_id] = summary = _summary(report)
        log.info(
            "webhook.synced",
            provider=provider,
            delivery=push.delivery_id,
            source=manifest.source_id,
            **{k: v if isinstance(v, int) else len(v) for k, v in summary.items()},
        )
    await ports.deliveries.record(
        provider, push.delivery_id, ",".join(m.source_id for m in targets)
    )
    return 200, result


def _summary(report: IngestReport) -> dict[str, Any]:
    return {
        "created": len(report.created),
        "updated": len(report.updated),
        "deleted": len(report.deleted),
        "unchanged": report.unchanged,
        "skipped": [{"doc_id": s.doc_id, "reason": s.reason} for s in report.skipped],
    }


def _verified(
    provider: Provider,
    manifests: Sequence[SourceManifest],
    body: bytes,
    headers: Mapping[str, str],
) -> list[SourceManifest]:
    """The sources of the repository whose webhook secret the delivery is signed with."""
    verified = []
    # With no source, or a source with no secret set, the signature is still checked, against
    # a throwaway secret: the same work either way, so not even the time taken tells an
    # unknown repository from a registered one.
    candidates: list[SourceManifest | None] = [*manifests] or [None]
    for manifest in candidates:
        secret = _secret(manifest) if manifest is not None else None
        signed = signed_with(provider, secret or secrets.token_hex(32), body, headers)
        if manifest is not None and secret and signed:
            verified.append(manifest)
    return verified


def _secret(manifest: SourceManifest) -> str | None:
    name = manifest.git.webhook_secret_env if manifest.git else None
    secret = os.environ.get(name) if name else None
    if not secret:
        log.warning(
            "webhook.no_secret",
            source=manifest.source_id,
            env=name,
            hint="set the environment variable named by git.webhook_secret_env",
        )
    return secret or None


def build_app(ports: ReceiverPorts) -> web.Application:
    async def receive(request: web.Request) -> web.Response:
        provider: Provider = request.match_info["provider"]  # type: ignore[assignment]
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return web.json_response(
                {"error": f"body is over the {MAX_BODY_BYTES}-byte limit of a delivery"},
                status=413,
            )
        try:
            status, payload = await handle_delivery(provider, body, request.headers, ports)
        except WebhookRefused as refused:
            return web.json_response({"error": refused.reason}, status=refused.status)
        return web.json_response(payload, status=status)

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/webhooks/{provider:github|gitlab}", receive)
    app.router.add_get("/healthz", health)
    return app
