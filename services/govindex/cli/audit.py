"""`govindex audit`: the answered reads of the read API, newest first."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from govindex.cli.common import (
    AUDIT_ENDPOINTS,
    AUDIT_LIST_MAX,
    DEFAULT_DIR,
    JsonLines,
    LogLevel,
    StateDir,
    aware_datetime,
    console,
    print_table,
    setup,
    when,
    with_runtime,
)

if TYPE_CHECKING:
    from govindex.core.ports import AuditRow
    from govindex.runtime.composition import Runtime

_SHOWN_PRINCIPALS = 60  # characters of the principals column before it is cut


# Long on purpose: most of it is the typer options and the --help text.
def audit_command(
    tenant: Annotated[
        str | None, typer.Option("--tenant", metavar="TENANT", help="Only reads of TENANT.")
    ] = None,
    credential: Annotated[
        str | None,
        typer.Option(
            "--credential",
            metavar="NAME",
            help="Only reads by the credential named NAME (a token's name, or `jwt:<issuer>`).",
        ),
    ] = None,
    principal: Annotated[
        str | None,
        typer.Option(
            "--principal", metavar="PRINCIPAL", help="Only reads whose subject held principal P."
        ),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            metavar="ENDPOINT",
            help=f"Only this endpoint: {', '.join(AUDIT_ENDPOINTS)}.",
        ),
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            "--since",
            metavar="TIME",
            parser=aware_datetime,
            help="Reads answered at or after TIME (ISO 8601 with a zone).",
        ),
    ] = None,
    until: Annotated[
        datetime | None,
        typer.Option(
            "--until",
            metavar="TIME",
            parser=aware_datetime,
            help="...and before TIME.",
        ),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            metavar="N",
            min=1,
            max=AUDIT_LIST_MAX,
            help="At most this many records, newest first.",
        ),
    ] = 100,
    json_lines: JsonLines = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """List the audit records of answered reads, newest first.

    Every answered request of the read API (search, pack, chunk, verify, lineage) leaves a
    record: when, the endpoint and status, the credential that proved the caller, the tenant,
    the principals and scopes the read ran as, the purpose, `as_of` and `known_at`, a hash of
    the request and the chunks returned (a pack: its manifest hash). Records are kept
    GOVINDEX_AUDIT_RETENTION_DAYS days (`govindex retention` deletes older ones). Filters
    combine; `--json` prints every field, one record a line.

        govindex audit --tenant acme --since 2025-03-01T00:00:00Z
        govindex audit --principal user:alice --endpoint pack --limit 20
        govindex audit --credential rag-app --json
    """
    if endpoint is not None and endpoint not in AUDIT_ENDPOINTS:
        raise typer.BadParameter(
            f"{endpoint!r} is not one of {', '.join(AUDIT_ENDPOINTS)}", param_hint="--endpoint"
        )
    if since is not None and until is not None and until <= since:
        raise typer.BadParameter(
            f"--until {until.isoformat()} is not after --since", param_hint="--until"
        )
    settings = setup(state_dir, log_level)

    async def rows(rt: Runtime) -> list[AuditRow]:
        return await rt.audit.entries(
            tenant=tenant,
            credential=credential,
            principal=principal,
            endpoint=endpoint,
            since=since,
            until=until,
            limit=limit,
        )

    found = with_runtime(settings, rows)
    if json_lines:
        for row in found:
            console.print(json.dumps(dataclasses.asdict(row), default=_iso), soft_wrap=True)
        return 0
    _print_rows(found)
    return 0


def _print_rows(found: list[AuditRow]) -> None:
    """The records as a table, newest first; principals cut short."""
    if not found:
        console.print("no audit records match")
        return
    print_table(
        (
            "TIME",
            "ENDPOINT",
            "STATUS",
            "CREDENTIAL",
            "TENANT",
            "PRINCIPALS",
            "PURPOSE",
            "RETURNED",
            "PACK",
        ),
        (
            (
                when(r.at),
                r.endpoint,
                str(r.status),
                r.credential_name if r.subject is None else f"{r.credential_name} ({r.subject})",
                r.tenant,
                _cut(",".join(r.principals), _SHOWN_PRINCIPALS),
                r.purpose or "-",
                str(len(r.chunk_ids)),
                _short_hash(r.pack_hash),
            )
            for r in found
        ),
    )


def _iso(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _short_hash(value: str | None) -> str:
    if not value:
        return "-"
    return value.removeprefix("sha256:")[:12]
