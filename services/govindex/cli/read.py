"""`govindex query`, `pack`, `verify-pack`: the governed read service from the command line.

The commands call the same read service the HTTP API serves (`reader.service`), with the
same gates, on the servers of the running stack or of GOVINDEX_* settings.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from govindex.cli.common import (
    CHANNELS,
    DEFAULT_DIR,
    Failure,
    LogLevel,
    StateDir,
    argument,
    aware_datetime,
    console,
    hint,
    setup,
    short_version,
    when,
    with_runtime,
)

if TYPE_CHECKING:  # imported where they run: `govindex --help` builds no pydantic model
    from govindex.runtime.composition import Runtime
    from reader.models import (
        PackRequest,
        RelationsRequest,
        SearchRequest,
        SearchResponse,
        StoredPack,
    )

    R = TypeVar("R", SearchRequest, PackRequest, RelationsRequest)

Tenant = Annotated[str, typer.Option("--tenant", metavar="TENANT", help="The caller's tenant.")]
Principals = Annotated[
    list[str],
    typer.Option(
        "--principal",
        metavar="PRINCIPAL",
        help="A principal of the caller (repeat), e.g. group:sre.",
    ),
]
Scopes = Annotated[
    list[str] | None,
    typer.Option("--scope", metavar="SCOPE", help="A scope the caller holds (repeat)."),
]
Purpose = Annotated[
    str,
    typer.Option(
        "--purpose",
        metavar="PURPOSE",
        help="Why the caller asks, e.g. support: one of the allowed_purposes of the sources "
        "to read.",
    ),
]
AsOf = Annotated[
    datetime | None,
    typer.Option(
        "--as-of",
        metavar="TIME",
        parser=aware_datetime,
        help="Valid time to ask about, ISO 8601 with zone (default: now).",
    ),
]
KnownAt = Annotated[
    datetime | None,
    typer.Option(
        "--known-at",
        metavar="TIME",
        parser=aware_datetime,
        help="System time: answer with what the index held at this moment.",
    ),
]
Channels = Annotated[
    list[str] | None,
    typer.Option(
        "--channel",
        metavar="CHANNEL",
        help=f"A retrieval channel (repeat; default all): {', '.join(CHANNELS)}.",
    ),
]


# When an answer is empty the CLI says where to look, never what exists: the read API says
# nothing of what its gates withheld, and neither does this (the same words whatever the
# index holds).
NOTHING = (
    "nothing this caller may read matched. If you expected results, check --purpose (a "
    "source serves only the purposes its manifest allows), --scope and --principal: the "
    "sources you may read may not allow them."
)


def _request(model: type[R], **fields: object) -> R:
    from pydantic import ValidationError

    try:
        return model.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise typer.BadParameter(f"{where}: {first['msg']}") from None


def query_command(
    text: Annotated[str, argument("TEXT", "What to search for.")],
    tenant: Tenant,
    principal: Principals,
    purpose: Purpose,
    scope: Scopes = None,
    as_of: AsOf = None,
    known_at: KnownAt = None,
    channel: Channels = None,
    limit: Annotated[
        int, typer.Option(metavar="N", min=1, max=200, help="At most this many results.")
    ] = 10,
    json_lines: Annotated[
        bool, typer.Option("--json", help="One JSON object per hit (anchor, text, ranks).")
    ] = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Search the governed index: every channel fused, every hit through every gate.

    Returns only chunks of TENANT whose ACL admits one of the principals, whose required
    scopes the caller holds, allowed for the purpose, valid at --as-of (default now), not
    deleted, from an enabled source, intact and not untrusted instructions. A superseded
    version is returned for a time when it was the valid one. An empty answer says where
    to look (on stderr), never what was withheld.

        govindex query failover --tenant acme --principal group:eng --purpose support
        govindex query "rollback" --tenant acme --principal group:sre --purpose support \\
            --as-of 2025-03-01T00:00:00Z
    """
    from reader.app import read_service
    from reader.models import SearchRequest

    settings = setup(state_dir, log_level)
    request = _request(
        SearchRequest,
        tenant=tenant,
        subject={"principals": principal, "scopes": scope or []},
        purpose=purpose,
        as_of=as_of,
        known_at=known_at,
        query=text,
        channels=channel,
        limit=limit,
        cache="bypass",
    )
    response = with_runtime(settings, lambda rt: read_service(rt).search(request))
    if json_lines:
        for hit in response.hits:
            record = {
                "rank": hit.rank,
                "score": hit.score,
                "channels": hit.channels,
                **hit.anchor.model_dump(mode="json"),
                "kind": hit.kind,
                "text": hit.text,
            }
            console.print(json.dumps(record), soft_wrap=True)
    else:
        _print_hits(request, response)
    if not response.hits:
        hint(NOTHING)
    return 0


def pack_command(
    text: Annotated[str, argument("TEXT", "What the pack is about.")],
    tenant: Tenant,
    principal: Principals,
    purpose: Purpose,
    scope: Scopes = None,
    as_of: AsOf = None,
    known_at: KnownAt = None,
    channel: Channels = None,
    entity: Annotated[
        list[str] | None,
        typer.Option("--entity", metavar="ENTITY", help="A seed entity, e.g. service:orders-db."),
    ] = None,
    max_tokens: Annotated[
        int, typer.Option(metavar="N", min=1, help="Token budget of the pack.")
    ] = 4000,
    max_items: Annotated[
        int, typer.Option(metavar="N", min=1, max=200, help="At most this many items.")
    ] = 20,
    max_per_document: Annotated[
        int, typer.Option(metavar="N", min=1, help="Items per document.")
    ] = 3,
    neighbours: Annotated[
        int, typer.Option(metavar="N", min=0, max=2, help="Neighbours each side.")
    ] = 1,
    required_evidence: Annotated[
        list[str] | None,
        typer.Option(
            "--required-evidence",
            metavar="TYPE[:MIN]",
            help="Evidence the pack must hold, selected first (repeat), e.g. "
            "deployment_record or timeline_entry:3; the manifest says what is missing.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", metavar="FILE", help="Write the pack JSON here (default: stdout)."
        ),
    ] = None,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Build a context pack: fused, gated, hydrated, deduplicated, within a token budget.

    Prints (or writes with --out) the pack as JSON: items with citation keys and anchors,
    hydrated context, corroborating copies, conflict flags, and a manifest with a
    pack_hash that `govindex verify-pack` re-checks later. With --required-evidence, those
    types are selected first; exit 2 when some of them are missing (the manifest's
    missing_evidence says which and why). An empty pack says where to look (on stderr),
    never what was withheld.

        govindex pack "orders-db failover" --tenant acme --principal group:sre \\
            --purpose support --max-tokens 2000 -o pack.json
    """
    from reader.app import read_service
    from reader.models import Budget, Hydration, PackRequest

    settings = setup(state_dir, log_level)
    request = _request(
        PackRequest,
        tenant=tenant,
        subject={"principals": principal, "scopes": scope or []},
        purpose=purpose,
        as_of=as_of,
        known_at=known_at,
        query=text,
        entities=entity or [],
        channels=channel,
        budget=Budget(
            max_tokens=max_tokens, max_items=max_items, max_per_document=max_per_document
        ),
        hydration=Hydration(neighbours=neighbours),
        required_evidence=[_required(r) for r in required_evidence or []],
        cache="bypass",
    )
    pack = with_runtime(settings, lambda rt: read_service(rt).pack(request))
    body = pack.model_dump_json(indent=2)
    if out is None:
        sys.stdout.write(body + "\n")
    else:
        out.write_text(body + "\n")
        console.print(
            f"pack: {len(pack.items)} item(s), {pack.used_tokens}/{pack.max_tokens} tokens, "
            f"pack_hash {pack.manifest.pack_hash[:16]} -> {out}",
            soft_wrap=True,
        )
    if not pack.items:
        hint(NOTHING)
    for gap in pack.manifest.missing_evidence:
        console.print(
            f"missing evidence: {gap.type}: {gap.found} of {gap.min} ({gap.why})", soft_wrap=True
        )
    return 0 if pack.manifest.status == "complete" else 2


def _required(given: str) -> dict[str, object]:
    """`TYPE` or `TYPE:MIN` of --required-evidence (the request model checks both)."""
    kind, _, minimum = given.partition(":")
    if minimum and not (minimum.isascii() and minimum.isdigit() and len(minimum) <= 3):
        raise Failure(f"--required-evidence {given!r}: MIN is a number, e.g. timeline_entry:3")
    return {"type": kind, "min": int(minimum) if minimum else 1}


def relations_command(
    entity: Annotated[str, argument("ENTITY", "A business id, e.g. service:payment-api.")],
    tenant: Tenant,
    principal: Principals,
    purpose: Purpose,
    scope: Scopes = None,
    as_of: AsOf = None,
    known_at: KnownAt = None,
    relation: Annotated[
        str | None,
        typer.Option(
            "--relation",
            metavar="RELATION",
            help="One relation (OWNED_BY, DEPENDS_ON, AFFECTED, ...) or its inverse (OWNS, "
            "AFFECTED_BY, ...); default: all.",
        ),
    ] = None,
    direction: Annotated[
        str,
        typer.Option(
            "--direction", metavar="DIRECTION", help="out (the entity is the subject), in, or both."
        ),
    ] = "both",
    object_type: Annotated[
        str | None,
        typer.Option(
            "--object-type",
            metavar="TYPE",
            help="Only edges whose other end is of this type (team, deployment, ...).",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Show an entity's relations at a moment, each with its evidence.

    Every edge valid at --as-of (and held at --known-at) whose evidence chunk the caller may
    see: its validity window, when it happened, the document version and chunk that state
    it, how it was extracted (frontmatter, or a fact mapping with its confidence), whether
    its other end is unresolved, and the edges it contradicts (two owners at once are both
    shown, marked).

        govindex relations service:payment-api --relation OWNED_BY --tenant acme \\
            --principal group:sre --purpose incident-response --as-of 2025-03-01T02:05:00Z
    """
    from reader.app import read_service
    from reader.models import RelationsRequest

    settings = setup(state_dir, log_level)
    request = _request(
        RelationsRequest,
        tenant=tenant,
        subject={"principals": principal, "scopes": scope or []},
        purpose=purpose,
        as_of=as_of,
        known_at=known_at,
        entity=entity,
        relation=relation,
        direction=direction,
        object_type=object_type,
    )
    found = with_runtime(settings, lambda rt: read_service(rt).relations(request))
    if json_out:
        sys.stdout.write(found.model_dump_json(indent=2) + "\n")
        return 0
    console.print(f"{entity} at {when(found.as_of)}: {len(found.edges)} edge(s)")
    if not found.edges:
        hint(NOTHING)
    for e in found.edges:
        until = when(e.valid_to) or "open"
        against = f"  contradicts {', '.join(e.contradicts)}" if e.contradicts else ""
        happened = f"  happened {when(e.event_time)}" if e.event_time else ""
        how = e.method if e.confidence == 1 else f"{e.method} {e.confidence:.2f}"
        loose = "  (unresolved)" if e.unresolved else ""
        console.print(
            f"  {e.subject} {e.relation} {e.object}{loose}  valid {when(e.valid_from)} to "
            f"{until}{happened}  ({e.evidence.source_id}/{e.evidence.locator} "
            f"{e.source_version}, {how}){against}",
            soft_wrap=True,
        )
    return 0


EXIT = {"valid": 0, "invalid": 1, "tampered": 1, "stale": 2}

packs_app = typer.Typer(
    help="Packs kept under an Idempotency-Key (POST /v1/packs), as GET /v1/packs/{id} serves them.",
    no_args_is_help=True,
)


@packs_app.command("show")
def packs_show_command(
    pack_id: Annotated[str, argument("ID", "The pack_id of a kept pack.")],
    tenant: Tenant,
    json_out: Annotated[bool, typer.Option("--json", help="Print the whole answer.")] = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Show a kept pack re-judged now, for the subject it was built for.

    Lists the items still served and those withheld (deleted, revoked, purged) with the
    reason, never their text unless --json is given (which prints the served items whole).
    Exit 0 when every item is served, 2 when some are withheld or stale, 1 when the pack is
    unknown, expired, or nothing of it can be served.

        govindex packs show 3f6c0d9e8b7a4c21a0e5d4b3c2f1e0d9 --tenant acme
    """
    from reader.app import read_service
    from reader.keeping import KeptGone, PackKeeper

    settings = setup(state_dir, log_level)

    async def show(rt: Runtime) -> StoredPack | None:
        service = read_service(rt)
        keeper = PackKeeper(
            service, rt.packs, settings.topics.receipts, settings.pack_retention_days
        )
        return await keeper.stored(tenant, pack_id, None)

    try:
        found = with_runtime(settings, show)
    except KeptGone as exc:
        raise Failure(f"pack {pack_id}: {exc}") from None
    if found is None:
        raise Failure(f"no kept pack {pack_id} in tenant {tenant} (unknown or expired)")
    if json_out:
        sys.stdout.write(found.model_dump_json(indent=2) + "\n")
    else:
        manifest = found.pack.manifest
        console.print(
            f"{found.status}: pack {pack_id}, built {manifest.built_at}, as_of {manifest.as_of}, "
            f"expires {found.expires_at}",
            soft_wrap=True,
        )
        for item in found.pack.items:
            a = item.anchor
            console.print(f"  {item.key} {a.source_id}/{a.doc_id} {a.locator}", soft_wrap=True)
        for gone in found.withheld:
            console.print(f"  {gone.key} {gone.chunk_id}: withheld ({gone.reason})", soft_wrap=True)
    return 0 if found.status == "valid" else 2


def verify_pack_command(
    file: Annotated[Path, argument("FILE", "A pack or a manifest (JSON) to check.", kind=Path)],
    json_out: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Check a pack's manifest against the index now.

    valid: everything pinned is still there, unchanged, visible to the same subject for the
    same purpose at the pack's as_of. stale: some item was superseded by a newer version
    since. invalid: some item was deleted, revoked, had its scope or purpose withdrawn,
    changed, or its validity moved away from as_of. tampered: the manifest does not match
    its pack_hash. Exit 0 valid, 1 invalid or tampered, 2 stale. No text is printed.

        govindex verify-pack pack.json
        govindex verify-pack pack.json --json
    """
    from pydantic import ValidationError

    from reader.app import read_service
    from reader.models import Manifest, Pack

    settings = setup(state_dir, log_level)
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        raise Failure(f"{file}: no such file") from None
    except json.JSONDecodeError as exc:
        raise Failure(f"{file} is not JSON ({exc.msg}, line {exc.lineno})") from None
    try:
        manifest = (
            Pack.model_validate(data).manifest
            if "manifest" in data
            else Manifest.model_validate(data)
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Failure(f"{file} is not a pack or manifest: {where}: {first['msg']}") from None
    verdict = with_runtime(settings, lambda rt: read_service(rt).verify(manifest))
    if json_out:
        console.print(verdict.model_dump_json(indent=2), soft_wrap=True)
    else:
        console.print(f"{verdict.status}: {len(verdict.pins)} pinned chunk(s) checked")
        for pin in verdict.pins:
            if pin.status != "valid":
                console.print(f"  {pin.key} {pin.chunk_id}: {pin.status} ({pin.reason})")
    return EXIT[verdict.status]


def _print_hits(request: SearchRequest, response: SearchResponse) -> None:
    console.print(
        f"{len(response.hits)} result(s) for {request.query!r} as of {when(response.as_of)} "
        f"(tenant {request.tenant}, principals {', '.join(request.subject.principals or ())}, "
        f"purpose {request.purpose})"
        + (f"; unavailable: {', '.join(response.degraded)}" if response.degraded else "")
    )
    for hit in response.hits:
        a = hit.anchor
        found_by = ", ".join(f"{c}#{r}" for c, r in sorted(hit.channels.items()))
        console.print(f"\n{hit.rank}. {a.locator}  [{hit.kind}]  {found_by}")
        console.print(f"   {' > '.join(a.heading_path)}" if a.heading_path else "   (preamble)")
        console.print(f"   {_first_body_line(hit.text)[:100]}")
        console.print(
            f"   source_version {short_version(a.source_version)}  seq {a.sequence}  "
            f"lines {a.line_start}-{a.line_end}  hash {a.content_hash[:19]}"
        )


def _first_body_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    body = [ln for ln in lines if not ln.startswith("#")]
    return (body or lines or [""])[0]
