"""The client's adapters with their real libraries against the real read API: LangChain and
LlamaIndex retrievers answer with governed hits and packs (chunk ids, anchors, a manifest to
verify), and the MCP server (`govindex-mcp`, over stdio and streamable HTTP) reads as the
subject of its configuration whatever a tool call's arguments say."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.documents import Document
from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore, TextNode
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from govindex.control.workers import Workers
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from govindex_client import AsyncGovindexClient, GovindexClient
from govindex_client.langchain import GovindexPackRetriever
from govindex_client.langchain import GovindexRetriever as LangChainRetriever
from govindex_client.llamaindex import GovindexRetriever as LlamaIndexRetriever
from reader.app import ReadServer
from tests.support.pipeline import Pipeline
from tests.support.proxy import free_port

pytestmark = pytest.mark.e2e

BOUND = "bound-adapter-token-0123456789"
SECRET = "ZEBRAQUARTZ7731"  # only in the HR-only document
ENG_DOC = "runbooks/orders-db.md"
HR_DOC = "hr/payroll.md"
QUERY = "payroll orders-db failover replica"
RUNBOOK = """# Orders DB failover

Promote the replica when the primary of orders-db stops answering: check replication lag on
orders-db, then promote the replica with `pg_ctl promote`.

## Afterwards

Rebuild the old primary as a replica of the new one and watch its replication lag.
"""
HR_ONLY = f"""# Payroll failover

The payroll batch key is {SECRET}; never share it. Restart the replica after failover.
"""
TOOLS = {"search", "build_pack", "verify_pack", "open_chunk", "relations"}
WHO = {"tenant", "tenant_id", "subject", "principals", "principal", "scopes", "purpose"}


@pytest.fixture(scope="module")
async def corpus(module_runtime: tuple[Runtime, Workers]) -> AsyncIterator[Pipeline]:
    """One tenant: a runbook group:eng may read and an HR-only document, both on failover."""
    rt, workers = module_runtime
    p = Pipeline(rt, tenant=f"tenant-{uuid.uuid4().hex[:8]}")
    await p.register()
    p.workers = workers
    ids = p.publish(p.change(ENG_DOC, 1, RUNBOOK), p.change(HR_DOC, 1, HR_ONLY, acl=["group:hr"]))
    await p.wait_processed(ids)
    await rt.index.refresh()
    yield p
    p.workers = None
    p.close()


@pytest.fixture(scope="module")
async def api(corpus: Pipeline) -> AsyncIterator[str]:
    """The read API with one token bound to the tenant, `group:eng*` and `support`."""
    binding = {"name": "agent", "tenants": [corpus.tenant], "principals": ["group:eng*"]}
    binding["purposes"] = ["support"]
    server = ReadServer(corpus.rt, dict(Settings(read_tokens={BOUND: binding}).read_tokens))
    url = await server.start()
    yield url
    await server.stop()


@pytest.fixture
def client(corpus: Pipeline, api: str) -> Iterator[GovindexClient]:
    with GovindexClient(
        api, BOUND, tenant=corpus.tenant, purpose="support", principals=["group:eng"]
    ) as blocking:
        yield blocking


@pytest.fixture
async def async_client(corpus: Pipeline, api: str) -> AsyncIterator[AsyncGovindexClient]:
    async with AsyncGovindexClient(
        api, BOUND, tenant=corpus.tenant, purpose="support", principals=["group:eng"]
    ) as asynchronous:
        yield asynchronous


# --- LangChain ---------------------------------------------------------------------------


async def test_the_langchain_retriever_returns_documents_with_chunk_ids_and_anchors(
    client: GovindexClient, async_client: AsyncGovindexClient
) -> None:
    retriever = LangChainRetriever(client=client, limit=5)

    # invoke blocks, and the read API serves on this event loop: it runs in a thread.
    docs = await asyncio.to_thread(retriever.invoke, QUERY)

    hits = (await async_client.search(QUERY, limit=5)).hits
    assert len(docs) >= 2 and all(isinstance(d, Document) for d in docs)
    assert [d.id for d in docs] == [h.anchor.chunk_id for h in hits]
    for doc, hit in zip(docs, hits, strict=True):
        assert doc.page_content == hit.text
        assert doc.metadata["anchor"] == hit.anchor.model_dump(mode="json")
        assert doc.metadata["anchor"]["chunk_id"] == doc.id
        assert doc.metadata["channels"] == hit.channels and doc.metadata["channels"]
        assert doc.metadata["score"] == hit.score
    assert {d.metadata["anchor"]["doc_id"] for d in docs} == {ENG_DOC}
    assert SECRET not in json.dumps([d.model_dump() for d in docs])

    natively = LangChainRetriever(client=client, async_client=async_client, limit=5)
    assert [d.id for d in await natively.ainvoke(QUERY)] == [d.id for d in docs]


async def test_the_langchain_pack_retriever_returns_the_items_in_order_and_verifies(
    client: GovindexClient, async_client: AsyncGovindexClient
) -> None:
    # No hydration: the runbook's sections are items of their own, not each other's context.
    options: dict[str, Any] = {"budget": {"max_items": 3}, "hydration": {"neighbours": 0}}
    retriever = GovindexPackRetriever(client=client, options=options)
    assert retriever.last_manifest is None

    docs = await asyncio.to_thread(retriever.invoke, QUERY)

    pack = retriever.last_pack
    assert pack is not None and len(pack.items) >= 2  # so that the order says something
    assert retriever.last_manifest == pack.manifest
    assert [d.id for d in docs] == [i.anchor.chunk_id for i in pack.items]
    assert [d.metadata["key"] for d in docs] == [f"S{n}" for n in range(1, len(docs) + 1)]
    assert all(d.metadata["pack_hash"] == pack.manifest.pack_hash for d in docs)
    assert {d.metadata["anchor"]["doc_id"] for d in docs} == {ENG_DOC}
    # The same request on the same state: the same pack, so the order is the pack's own.
    direct = await async_client.pack(QUERY, **options)
    assert direct.manifest.items == pack.manifest.items
    assert (await asyncio.to_thread(retriever.verify)).status == "valid"

    natively = GovindexPackRetriever(client=client, async_client=async_client, options=options)
    assert [d.id for d in await natively.ainvoke(QUERY)] == [d.id for d in docs]
    assert (await natively.averify()).status == "valid"


# --- LlamaIndex --------------------------------------------------------------------------


async def test_the_llamaindex_retriever_returns_scored_text_nodes_with_anchors(
    client: GovindexClient, async_client: AsyncGovindexClient, corpus: Pipeline
) -> None:
    retriever = LlamaIndexRetriever(client, limit=5)

    nodes = await asyncio.to_thread(retriever.retrieve, QUERY)

    hits = (await async_client.search(QUERY, limit=5)).hits
    assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
    assert all(isinstance(n.node, TextNode) for n in nodes)
    assert [n.node.node_id for n in nodes] == [h.anchor.chunk_id for h in hits]
    for scored, hit in zip(nodes, hits, strict=True):
        node = scored.node
        assert isinstance(node, TextNode) and node.text == hit.text
        assert scored.score == hit.score
        anchor = hit.anchor.model_dump(mode="json")
        assert {k: node.metadata[k] for k in anchor} == anchor
        assert node.metadata["channels"] == hit.channels
        source = node.relationships[NodeRelationship.SOURCE]
        assert not isinstance(source, list)
        assert source.node_id == f"{corpus.tenant}/{corpus.source}/{ENG_DOC}"
        assert hit.anchor.content_hash not in node.get_content(metadata_mode=MetadataMode.LLM)
    assert SECRET not in json.dumps([n.node.get_content() for n in nodes])

    natively = LlamaIndexRetriever(client, async_client=async_client, limit=5)
    assert [n.node.node_id for n in await natively.aretrieve(QUERY)] == [
        n.node.node_id for n in nodes
    ]


# --- MCP ---------------------------------------------------------------------------------


def _mcp_env(api: str, tenant: str) -> dict[str, str]:
    return {
        "GOVINDEX_READ_URL": api,
        "GOVINDEX_READ_TOKEN": BOUND,
        "GOVINDEX_MCP_TENANT": tenant,
        "GOVINDEX_MCP_PURPOSE": "support",
        "GOVINDEX_MCP_PRINCIPALS": "group:eng",
    }


GOVINDEX_MCP = str(Path(sys.executable).parent / "govindex-mcp")


def _structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def _reads_as_configured(session: ClientSession) -> None:
    """What both transports must show: the five tools, schemas without any field that says
    who reads, answers as group:eng, and a call that tries to name the subject refused."""
    await session.initialize()
    listed = (await session.list_tools()).tools
    assert {t.name for t in listed} == TOOLS
    for tool in listed:
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert not WHO & set(schema["properties"]), (tool.name, schema["properties"])
        assert tool.output_schema is not None and tool.description
    by_name = {t.name: t for t in listed}
    assert by_name["search"].input_schema["required"] == ["query"]
    assert by_name["verify_pack"].input_schema["required"] == ["manifest"]
    assert by_name["open_chunk"].input_schema["required"] == ["chunk_id"]
    assert by_name["relations"].input_schema["required"] == ["entity"]

    found = _structured(await session.call_tool("search", {"query": QUERY, "limit": 5}))
    assert {h["anchor"]["doc_id"] for h in found["hits"]} == {ENG_DOC}
    pack = _structured(await session.call_tool("build_pack", {"query": QUERY, "max_items": 2}))
    assert pack["items"] and pack["manifest"]["subject"]["principals"] == ["group:eng"]
    verdict = await session.call_tool("verify_pack", {"manifest": pack["manifest"]})
    assert _structured(verdict)["status"] == "valid"
    anchor = pack["items"][0]["anchor"]
    opened = _structured(await session.call_tool("open_chunk", {"chunk_id": anchor["chunk_id"]}))
    assert opened["anchor"] == anchor

    answers: list[CallToolResult] = []
    for name, arguments in (
        ("search", {"query": QUERY, "principals": ["group:hr"]}),
        ("search", {"query": QUERY, "tenant": "someone-else"}),
        ("build_pack", {"query": QUERY, "subject": {"principals": ["group:hr"]}}),
        ("build_pack", {"query": QUERY, "purpose": "audit"}),
        ("open_chunk", {"chunk_id": anchor["chunk_id"], "principals": ["group:hr"]}),
    ):
        refused = await session.call_tool(name, arguments)
        answers.append(refused)
        assert refused.is_error, (name, arguments, refused.structured_content)
        said = " ".join(getattr(c, "text", "") for c in refused.content)
        assert "Extra inputs are not permitted" in said, said
    # A manifest of someone else's pack is not verified for them either.
    theirs = {**pack["manifest"], "subject": {"principals": ["group:hr"], "scopes": []}}
    refused = await session.call_tool("verify_pack", {"manifest": theirs})
    assert refused.is_error
    answers.append(refused)
    # However asked, the HR-only document never reaches the agent.
    hr = _structured(await session.call_tool("search", {"query": "payroll batch key share"}))
    assert HR_DOC not in {h["anchor"]["doc_id"] for h in hr["hits"]}
    shown = json.dumps([a.model_dump(mode="json") for a in answers]) + json.dumps([found, hr])
    assert SECRET not in shown + json.dumps([pack, opened])


async def test_the_mcp_server_over_stdio_reads_as_its_configured_subject_only(
    corpus: Pipeline, api: str, tmp_path: Path
) -> None:
    server = StdioServerParameters(command=GOVINDEX_MCP, env=_mcp_env(api, corpus.tenant))
    with (tmp_path / "mcp.log").open("w") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await _reads_as_configured(session)


@pytest.fixture
def mcp_over_http(corpus: Pipeline, api: str, tmp_path: Path) -> Iterator[str]:
    """`govindex-mcp --transport http` on a free loopback port, until the test ends."""
    port = free_port()
    log = (tmp_path / "mcp.log").open("w")
    served = subprocess.Popen(
        [GOVINDEX_MCP, "--transport", "http", "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, **_mcp_env(api, corpus.tenant)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert served.poll() is None, (tmp_path / "mcp.log").read_text()
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "govindex-mcp did not listen"
                time.sleep(0.1)
        yield url
    finally:
        served.terminate()
        served.wait(timeout=30)
        log.close()


async def test_the_mcp_server_over_streamable_http_reads_as_its_configured_subject_only(
    mcp_over_http: str,
) -> None:
    async with (
        streamable_http_client(mcp_over_http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await _reads_as_configured(session)


def test_govindex_mcp_refuses_to_start_without_its_configuration() -> None:
    bare = {k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")}
    done = subprocess.run(
        [GOVINDEX_MCP], env=bare, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert "GOVINDEX_READ_URL, GOVINDEX_READ_TOKEN, GOVINDEX_MCP_TENANT" in done.stderr
    bad = {**bare, **_mcp_env("http://127.0.0.1:1", "acme"), "GOVINDEX_MCP_PRINCIPALS": "a\x01"}
    done = subprocess.run(
        [GOVINDEX_MCP], env=bad, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2 and "GOVINDEX_MCP_PRINCIPALS is refused" in done.stderr
