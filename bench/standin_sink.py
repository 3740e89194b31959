"""A loopback stand-in for OpenSearch that takes every write at once and keeps none of it.

`bench/throughput.py --sink standin` points the indexer processes at it, so their bulks
cost nothing and what is timed is the indexer's own ceiling (parse, chunk, stamp, the
Postgres apply, Kafka). It runs in a process of its own, never on the benchmark's event
loop. What it answers (each with the smallest body the OpenSearch client and govindex read):

- `_bulk`: one item per action line (the NDJSON source lines are skipped unparsed),
  `index`/`create`/`update` as 201 `created` with the `_id` echoed and `_version` from
  an external `version`, `delete` as 200 `deleted`;
- index metadata, kept as names only so start-up takes the production path (template,
  a generation's index, the alias, `prepare`'s rebuild): `_index_template`, an index's
  PUT/HEAD/GET/DELETE, `_mapping`, `_alias`, `_aliases`;
- reads as an empty index: `_count` 0, `_search` no hits, `_mget` not found,
  `_delete_by_query` nothing deleted, `_refresh` done; `/` and `_cluster/health` green.

Anything else is answered 200 `{}` and logged to stderr once per method and path shape, so
a call this stand-in does not know is never silently wrong; on stop it says how many bulks
and actions it answered.

    python bench/standin_sink.py --port 0   # prints "listening on http://127.0.0.1:PORT"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
from fnmatch import fnmatchcase
from typing import Any

from aiohttp import web

SHARDS = {"total": 1, "successful": 1, "failed": 0}
WRITES = ("index", "create", "update")  # actions followed by a source line


class Metadata:
    """Index and alias names, the only state: `prepare` and the workers' alias lookups
    must see the generation they created. No document is ever kept."""

    def __init__(self) -> None:
        self.indices: set[str] = set()
        self.aliases: dict[str, set[str]] = {}  # alias -> its indices

    def resolve(self, expression: str) -> list[str]:
        """The indices a comma-separated expression of names, aliases and wildcards names."""
        found: list[str] = []
        for part in expression.split(","):
            if "*" in part:
                found += sorted(i for i in self.indices if fnmatchcase(i, part))
            elif part in self.aliases:
                found += sorted(self.aliases[part])
            elif part in self.indices:
                found.append(part)
        return found

    def known(self, expression: str) -> bool:
        """Whether every concrete part exists (wildcards match nothing without error)."""
        return all(
            "*" in p or p in self.indices or p in self.aliases for p in expression.split(",")
        )

    def apply(self, actions: list[dict[str, Any]]) -> None:
        for action in actions:
            for op, spec in action.items():
                index, alias = spec.get("index"), spec.get("alias")
                if op == "add" and index and alias:
                    self.indices.add(index)
                    self.aliases.setdefault(alias, set()).add(index)
                elif op == "remove" and index and alias:
                    self.aliases.get(alias, set()).discard(index)
                elif op == "remove_index" and index:
                    self.drop(index)

    def drop(self, index: str) -> None:
        self.indices.discard(index)
        for members in self.aliases.values():
            members.discard(index)

    def alias_body(self, name: str) -> dict[str, Any]:
        """GET _alias/{name}: {index: {"aliases": {alias: {}}}} for every match."""
        body: dict[str, Any] = {}
        for alias, members in self.aliases.items():
            if fnmatchcase(alias, name):
                for index in members:
                    body.setdefault(index, {"aliases": {}})["aliases"][alias] = {}
        return body


def bulk_items(body: bytes, default_index: str | None, meta: Metadata) -> list[dict[str, Any]]:
    """One success item per action line; source lines are skipped, never parsed."""
    items: list[dict[str, Any]] = []
    lines = iter(body.splitlines())
    for line in lines:
        if not line.strip():
            continue
        op, spec = next(iter(json.loads(line).items()))
        if op in WRITES:
            next(lines, None)
        name = spec.get("_index") or default_index or ""
        concrete = meta.resolve(name) if name in meta.aliases else [name]
        item = {
            "_index": concrete[0] if concrete else name,
            "_id": spec.get("_id"),
            "_version": int(spec.get("version", 1)),
            "_shards": SHARDS,
            "_seq_no": 0,
            "_primary_term": 1,
        }
        if op == "delete":
            item |= {"result": "deleted", "status": 200}
        else:
            item |= {"result": "created", "status": 201}
        items.append({op: item})
    return items


def missing(name: str) -> web.Response:
    """A 404 the client maps to NotFoundError."""
    error = {"type": "index_not_found_exception", "reason": f"no such index [{name}]"}
    return web.json_response({"error": error, "status": 404}, status=404)


class StandIn:
    """The request handler: one catch-all route, dispatched on the path's segments."""

    def __init__(self) -> None:
        self.meta = Metadata()
        self.unknown: set[tuple[str, str]] = set()
        self.bulks = self.actions = 0  # said on stop: proof the writes did come here

    async def handle(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        method = request.method
        body = await request.read()
        if not parts:
            return web.json_response(root_info()) if method != "HEAD" else web.Response()
        if parts[-1] == "_bulk":
            default = parts[0] if len(parts) == 2 else None
            items = bulk_items(body, default, self.meta)
            self.bulks += 1
            self.actions += len(items)
            return web.json_response({"took": 0, "errors": False, "items": items})
        if parts[0].startswith("_"):
            return self.cluster(method, parts, body)
        return self.on_index(method, parts, body)

    def cluster(self, method: str, parts: list[str], body: bytes) -> web.Response:
        """Requests that name no index: templates, aliases, health."""
        head = parts[0]
        if head == "_index_template" or head == "_template":
            return ack()
        if head == "_aliases" and method in ("POST", "PUT"):
            self.meta.apply(json.loads(body or b"{}").get("actions", []))
            return ack()
        if head == "_alias" and len(parts) == 2:
            found = self.meta.alias_body(parts[1])
            if method == "HEAD":
                return web.Response(status=200 if found else 404)
            return web.json_response(found) if found else missing(parts[1])
        if parts[:2] == ["_cluster", "health"]:
            return web.json_response(health())
        if head in ("_count", "_search", "_refresh", "_mget", "_delete_by_query"):
            return self.read(head, "_all", body)
        return self.unknown_call(method, parts)

    def on_index(self, method: str, parts: list[str], body: bytes) -> web.Response:
        """Requests on an index expression: the index itself, its mapping, reads."""
        name = parts[0]
        if len(parts) == 1:
            return self.index_itself(method, name)
        verb = parts[1]
        if verb == "_mapping":
            if method == "GET":
                return web.json_response({i: {"mappings": {}} for i in self.meta.resolve(name)})
            return ack()
        if verb == "_alias" and len(parts) == 3:
            found = self.meta.alias_body(parts[2])
            if method == "HEAD":
                return web.Response(status=200 if found else 404)
            return web.json_response(found) if found else missing(parts[2])
        if verb in ("_count", "_search", "_refresh", "_mget", "_delete_by_query"):
            return self.read(verb, name, body)
        return self.unknown_call(method, parts)

    def index_itself(self, method: str, name: str) -> web.Response:
        if method == "HEAD":
            return web.Response(status=200 if self.meta.known(name) else 404)
        if method == "PUT":
            self.meta.indices.add(name)
            return web.json_response(
                {"acknowledged": True, "shards_acknowledged": True, "index": name}
            )
        if method == "DELETE":
            for index in self.meta.resolve(name):
                self.meta.drop(index)
            return ack()
        if method == "GET":
            if not self.meta.known(name):
                return missing(name)
            return web.json_response(
                {
                    i: {"aliases": {}, "mappings": {}, "settings": {}}
                    for i in self.meta.resolve(name)
                }
            )
        return self.unknown_call(method, [name])

    def read(self, verb: str, name: str, body: bytes) -> web.Response:
        """An empty index's answers: it holds nothing, so nothing is found or removed."""
        if verb == "_count":
            return web.json_response({"count": 0, "_shards": SHARDS})
        if verb == "_refresh":
            return web.json_response({"_shards": SHARDS})
        if verb == "_search":
            total = {"value": 0, "relation": "eq"}
            hits: dict[str, Any] = {"total": total, "max_score": None, "hits": []}
            return web.json_response(
                {"took": 0, "timed_out": False, "_shards": SHARDS, "hits": hits}
            )
        if verb == "_mget":
            ids = json.loads(body or b"{}").get("ids", [])
            docs = [{"_index": name, "_id": i, "found": False} for i in ids]
            return web.json_response({"docs": docs})
        return web.json_response(  # _delete_by_query
            {
                "took": 0,
                "timed_out": False,
                "total": 0,
                "deleted": 0,
                "batches": 0,
                "version_conflicts": 0,
                "noops": 0,
                "retries": {"bulk": 0, "search": 0},
                "failures": [],
            }
        )

    def unknown_call(self, method: str, parts: list[str]) -> web.Response:
        """Answered 200 `{}`, and said once per method and shape (index names elided)."""
        shape = "/" + "/".join(p if p.startswith("_") else "{index}" for p in parts)
        if (method, shape) not in self.unknown:
            self.unknown.add((method, shape))
            print(f"standin-sink: unknown request {method} {shape}", file=sys.stderr, flush=True)
        return web.json_response({})


def ack() -> web.Response:
    return web.json_response({"acknowledged": True})


def root_info() -> dict[str, Any]:
    version = {"distribution": "opensearch", "number": "2.19.0"}
    return {"name": "standin", "cluster_name": "standin", "version": version}


def health() -> dict[str, Any]:
    return {
        "cluster_name": "standin",
        "status": "green",
        "timed_out": False,
        "number_of_nodes": 1,
        "number_of_data_nodes": 1,
        "active_primary_shards": 0,
        "active_shards": 0,
        "relocating_shards": 0,
        "initializing_shards": 0,
        "unassigned_shards": 0,
    }


async def serve(port: int) -> None:
    """Listen on loopback until SIGTERM/SIGINT; print the URL once bound (port 0: any)."""
    standin = StandIn()
    app = web.Application(client_max_size=256 * 1024 * 1024)  # a bulk is <= 8 MiB, mostly
    app.router.add_route("*", "/{tail:.*}", standin.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    await web.SockSite(runner, sock).start()
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    print(
        f"standin-sink: answered {standin.bulks} bulks ({standin.actions} actions), "
        f"{len(standin.unknown)} unknown request shapes",
        file=sys.stderr,
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    asyncio.run(serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
