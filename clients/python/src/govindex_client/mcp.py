"""An MCP server over the read API (the `mcp` extra): `govindex-mcp`, over stdio or streamable
HTTP, with the tools `search`, `build_pack`, `verify_pack`, `open_chunk` and `relations`.

Who reads is the server's configuration, never a tool's arguments: the credential
(GOVINDEX_READ_TOKEN, a bound service token or a JWT, proving the subject to the read API),
the tenant and purpose (GOVINDEX_MCP_TENANT, GOVINDEX_MCP_PURPOSE) and, optionally, the
principals and scopes to read as (GOVINDEX_MCP_PRINCIPALS, GOVINDEX_MCP_SCOPES: separated by
commas or spaces; unset, the credential's own). No tool takes a tenant, principal, scope or
purpose, and a call naming an argument its schema does not list is refused.

    GOVINDEX_READ_URL=http://127.0.0.1:8700 GOVINDEX_READ_TOKEN=… GOVINDEX_MCP_TENANT=acme \\
    GOVINDEX_MCP_PURPOSE=support GOVINDEX_MCP_PRINCIPALS=group:eng govindex-mcp

The HTTP transport (`--transport http`) has no authentication of its own: whoever reaches
it reads as the configured subject, so it listens on loopback unless told otherwise.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
import types
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from govindex_client._types import Slug
from govindex_client.client import AsyncGovindexClient
from govindex_client.errors import GovindexError
from govindex_client.models import (
    MAX_ENTITIES,
    MAX_REQUIRED,
    ChunkView,
    Entity,
    Id,
    Manifest,
    Pack,
    Query,
    RelationsResponse,
    RequiredEvidence,
    SearchResponse,
    VerifyResponse,
    WirePrincipal,
)

ENV = {
    "read_url": "GOVINDEX_READ_URL",
    "read_token": "GOVINDEX_READ_TOKEN",
    "tenant": "GOVINDEX_MCP_TENANT",
    "purpose": "GOVINDEX_MCP_PURPOSE",
    "principals": "GOVINDEX_MCP_PRINCIPALS",
    "scopes": "GOVINDEX_MCP_SCOPES",
}
_SEPARATORS = re.compile(r"[\s,]+")
M = TypeVar("M", bound=BaseModel)


class McpConfig(BaseModel):
    """Where the read API is, the credential that proves who reads, and what is read for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    read_url: Annotated[str, Field(min_length=1, pattern=r"^https?://")]
    read_token: Annotated[str, Field(min_length=1, repr=False)]
    tenant: Slug
    purpose: Slug
    principals: list[WirePrincipal] | None = Field(default=None, min_length=1)
    scopes: list[WirePrincipal] | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> McpConfig:
        """The configuration in `env`; `ValueError` naming the variable missing or refused."""
        given: dict[str, Any] = {}
        for field, name in ENV.items():
            value = env.get(name, "").strip()
            if not value:
                continue
            given[field] = _SEPARATORS.split(value) if field in ("principals", "scopes") else value
        required = ("read_url", "read_token", "tenant", "purpose")
        missing = [ENV[f] for f in required if f not in given]
        if missing:
            raise ValueError(f"govindex-mcp needs {', '.join(missing)} set")
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            raise ValueError(f"{ENV[str(first['loc'][0])]} is refused: {first['msg']}") from None


# --- tool arguments: what an agent may choose, never who it reads as ----------------------

QueryText = Annotated[Query, Field(min_length=1, description="what to look for, in words")]
Entities = Annotated[
    list[Entity],
    Field(
        max_length=MAX_ENTITIES,
        description="seed entities for exact lookup and graph expansion, e.g. service:orders-db",
    ),
]
AsOf = Annotated[
    AwareDatetime | None,
    Field(description="the valid time asked about, ISO 8601 with a zone; default: now"),
]
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


# Long on purpose: the five tools' definitions, each a few lines, registered in one place.
def build_server(config: McpConfig, client: AsyncGovindexClient | None = None) -> MCPServer:
    """The MCP server reading through `client` (by default one built from `config`, closed
    when the server stops) as `config`'s tenant, purpose and subject."""
    reader = client or AsyncGovindexClient(
        config.read_url,
        config.read_token,
        tenant=config.tenant,
        purpose=config.purpose,
        principals=config.principals,
        scopes=config.scopes,
    )

    async def search(
        query: QueryText,
        entities: Entities = [],  # noqa: B006 - a schema default, never mutated
        as_of: AsOf = None,
        limit: Annotated[int, Field(ge=1, le=50, description="at most this many hits")] = 10,
    ) -> SearchResponse:
        """Search the governed index: hits the configured subject may read, each with its
        text, fused score, channel ranks and a citation anchor (chunk id, document, version,
        exact span, content hash)."""
        return await _answer(reader.search(query, entities=entities, as_of=as_of, limit=limit))

    async def build_pack(
        query: QueryText,
        entities: Entities = [],  # noqa: B006 - a schema default, never mutated
        as_of: AsOf = None,
        max_tokens: Annotated[
            int, Field(ge=1, le=200_000, description="token budget of the whole pack")
        ] = 4000,
        max_items: Annotated[int, Field(ge=1, le=200, description="at most this many items")] = 20,
        required_evidence: Annotated[
            list[RequiredEvidence],
            Field(
                max_length=MAX_REQUIRED,
                description="evidence the pack must hold, selected first, e.g. "
                '[{"type": "deployment_record"}, {"type": "timeline_entry", "min": 3}]; the '
                "manifest's status and missing_evidence say what is missing",
            ),
        ] = [],  # noqa: B006 - a schema default, never mutated
    ) -> Pack:
        """Build a context pack: cited items (S1, S2, …) with their parent and neighbours,
        within a token budget, and a manifest that pins every item and says what was left
        out and why. Keep the manifest to verify the pack later with verify_pack."""
        budget = {"max_tokens": max_tokens, "max_items": max_items}
        return await _answer(
            reader.pack(
                query,
                entities=entities,
                as_of=as_of,
                budget=budget,
                required_evidence=required_evidence,
            )
        )

    async def relations(
        entity: Annotated[Entity, Field(description="a business id, e.g. service:payment-api")],
        relation: Annotated[
            str | None,
            Field(
                description="one relation (OWNED_BY, DEPENDS_ON, AFFECTED, …) or its inverse "
                "(OWNS, AFFECTED_BY, …); null: all"
            ),
        ] = None,
        direction: Annotated[
            Literal["out", "in", "both"],
            Field(description="out: the entity is the subject; in: the object"),
        ] = "both",
        object_type: Annotated[
            str | None,
            Field(description="only edges whose other end is of this type (team, deployment)"),
        ] = None,
        as_of: AsOf = None,
    ) -> RelationsResponse:
        """The entity's relations at as_of: who owns it, what it depends on, which
        deployments it had, which incidents affected it; each edge with its validity window,
        when it happened, its evidence anchor and the edges it contradicts (two owners at
        once are both returned, marked)."""
        return await _answer(
            reader.relations(
                entity,
                relation=relation,
                direction=direction,
                object_type=object_type,
                as_of=as_of,
            )
        )

    async def verify_pack(
        manifest: Annotated[
            Manifest, Field(description="the manifest of a pack build_pack returned")
        ],
    ) -> VerifyResponse:
        """Verify a pack's manifest: valid, stale (superseded since), invalid (deleted,
        revoked, changed) or tampered, pin by pin."""
        _own(config, manifest)
        return await _answer(reader.verify(manifest))

    async def open_chunk(
        chunk_id: Annotated[Id, Field(description="an anchor's chunk_id")],
        as_of: AsOf = None,
    ) -> ChunkView:
        """Open one cited anchor by its chunk id, through the same gates as search: its
        text and anchor, or an error when the subject may not read it at as_of."""
        return await _answer(reader.chunk(chunk_id, as_of=as_of))

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            if client is None:
                await reader.aclose()

    who = " ".join(config.principals) if config.principals else "the credential's own principals"
    tools = [
        _strict(
            Tool.from_function(
                fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=READ_ONLY
            )
        )
        for fn in (search, build_pack, verify_pack, open_chunk, relations)
    ]
    return MCPServer(
        "govindex",
        instructions=(
            f"govindex's governed read API for tenant {config.tenant}, read as {who} for "
            f"purpose {config.purpose} (set by this server's configuration, not by tools). "
            "Search or build a pack, cite items by their anchors, verify a pack's manifest "
            "before relying on it later, open an anchor to read it again, ask an entity's "
            "relations at a moment (owner, dependencies, incidents) with their evidence."
        ),
        tools=tools,
        lifespan=lifespan,
    )


async def _answer(call: Awaitable[M]) -> M:
    """What `call` answers; a refusal becomes the tool error the agent reads."""
    try:
        return await call
    except GovindexError as exc:
        raise ToolError(str(exc)) from exc


def _own(config: McpConfig, manifest: Manifest) -> None:
    """Refuse a manifest of a pack built for another tenant, purpose or subject than this
    server's: an agent verifies the packs it was given, and learns nothing of others'."""
    held = set(manifest.subject.principals or ())
    mine = config.principals is None or held == set(config.principals)
    if manifest.tenant != config.tenant or manifest.purpose != config.purpose or not mine:
        raise ToolError(
            "this manifest is of a pack built for another tenant, purpose or subject than "
            "this server reads as: verify the manifests build_pack returned here"
        )


def _strict(tool: Tool) -> Tool:
    """`tool` refusing any argument its schema does not list (`additionalProperties: false`),
    so a tenant, principal or purpose slipped into a call is refused, not ignored."""
    loose = tool.fn_metadata.arg_model
    strict: type[BaseModel] = types.new_class(
        loose.__name__,
        (loose,),
        exec_body=lambda ns: ns.update(model_config=ConfigDict(extra="forbid")),
    )
    metadata = tool.fn_metadata.model_copy(update={"arg_model": strict})
    schema = strict.model_json_schema(by_alias=True)
    return tool.model_copy(update={"fn_metadata": metadata, "parameters": schema})


def main(argv: Sequence[str] | None = None) -> None:
    """`govindex-mcp [--transport stdio|http] [--host H] [--port P]`, configured by env."""
    parser = argparse.ArgumentParser(
        prog="govindex-mcp",
        description="An MCP server over govindex's governed read API; configured by "
        + ", ".join(ENV.values())
        + " (the last two optional).",
    )
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP only (default: loopback)")
    parser.add_argument("--port", type=int, default=8765, help="HTTP only (default: 8765)")
    args = parser.parse_args(argv)
    try:
        config = McpConfig.from_env(os.environ)
    except ValueError as exc:
        print(f"govindex-mcp: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    server = build_server(config)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


__all__ = ["ENV", "McpConfig", "build_server", "main"]
