"""`govindex status`: servers, topics with lag, dead letters, pending events and purges."""

from __future__ import annotations

from typing import Any

from govindex.adapters.kafka import OffsetReader
from govindex.adapters.kafka_security import KafkaSecurity
from govindex.adapters.opensearch import OpenSearchIndex, OpenSearchSecurity
from govindex.adapters.postgres.inspect import postgres_summary
from govindex.adapters.redis_cache import redis_version
from govindex.core.settings import Consumers, Settings, read_stack_file, redact


async def collect_status(settings: Settings) -> dict[str, Any]:
    report: dict[str, Any] = {
        "namespace": settings.namespace,
        "servers": {},
        "topics": [],
        "dead_letters": None,
        "pending_purges": [],
        "outbox_pending": None,
        "pending_events": [],
        "healing": [],
        "rebuilds": [],
        "cdc_feeds": [],
    }
    servers = report["servers"]
    servers["postgres"] = _check_postgres(settings, report)
    servers["kafka"] = _check_kafka(settings, report)
    servers["opensearch"] = await _check_opensearch(settings)
    servers["redis"] = _check_redis(settings)
    _healing_is_not_ok(report)
    # Under `govindex up`: how the supervisor found each embedded server.
    supervision = (read_stack_file(settings.state_dir) or {}).get("supervisor") or {}
    for name, state in supervision.items():
        if name in servers:
            servers[name]["supervisor"] = state
            if state.get("state") != "running":
                servers[name]["ok"] = False
                servers[name].setdefault("error", f"{name} exited; the supervisor restarts it")
    for info in servers.values():
        info["address"] = redact(info["address"]) if info.get("address") else info["address"]
    return report


def _check_postgres(settings: Settings, report: dict[str, Any]) -> dict[str, Any]:
    assert settings.pg_dsn
    try:
        summary = postgres_summary(settings.pg_dsn)
    except Exception as exc:  # any failure to read means "down", with the reason shown
        return {"address": settings.pg_dsn, "ok": False, "error": str(exc).strip()}
    report["pending_purges"] = summary.pop("pending_purges")
    report["outbox_pending"] = summary.pop("outbox_pending")
    report["pending_events"] = summary.pop("pending_events")
    report["healing"] = summary.pop("healing")
    report["rebuilds"] = summary.pop("rebuilds")
    report["cdc_feeds"] = summary.pop("cdc_feeds")
    return {"address": settings.pg_dsn, "ok": True, **summary}


def _healing_is_not_ok(report: dict[str, Any]) -> None:
    """A broker whose log was lost is not ok until the workers have rejoined it, and an
    index being rebuilt from Postgres after its server lost it is not ok until it is done,
    however quickly the servers themselves answered again."""
    servers = report["servers"]
    rejoining = [h["what"] for h in report.get("healing", [])]
    if rejoining and servers["kafka"].get("ok"):
        servers["kafka"].update(ok=False, error=f"workers are {rejoining[0]}")
    rebuilds = report.get("rebuilds", [])
    if rebuilds and servers["opensearch"].get("ok"):
        job = rebuilds[0]
        servers["opensearch"].update(
            ok=False,
            error=f"rebuilding the lost index from Postgres (job {job['job']}, "
            f"{job['done']}/{job['total']} chunks)",
        )


def _check_kafka(settings: Settings, report: dict[str, Any]) -> dict[str, Any]:
    assert settings.kafka_bootstrap
    try:
        reader = OffsetReader(settings.kafka_bootstrap, KafkaSecurity.from_settings(settings))
    except Exception as exc:
        return {"address": settings.kafka_bootstrap, "ok": False, "error": str(exc)}
    try:
        topics = settings.topics
        consumers = {
            topics.documents: Consumers.INDEXER,
            topics.deletions: Consumers.DELETIONS,
            topics.tombstones: Consumers.PURGER,
        }
        short: list[str] = []
        for topic in topics.all():
            ends = reader.end_offsets(topic)
            entry: dict[str, Any] = {
                "topic": topic,
                "partitions": len(ends),
                "messages": sum(ends.values()),
            }
            if len(ends) < settings.partitions:
                short.append(f"{topic} has {len(ends)} of {settings.partitions} partitions")
            worker = consumers.get(topic)
            if worker:
                lag = reader.lag(topic, settings.group(worker))
                entry["group"] = settings.group(worker)
                entry["lag"] = sum(p.lag for p in lag)
            report["topics"].append(entry)
            if topic == topics.dead_letters:
                report["dead_letters"] = sum(ends.values())
        for feed in report.get("cdc_feeds", []):  # each CDC feed: its topic and its group
            group = settings.group(f"{Consumers.CDC}.{feed['source']}")
            ends = reader.end_offsets(feed["topic"])
            report["topics"].append(
                {
                    "topic": feed["topic"],
                    "partitions": len(ends),
                    "messages": sum(ends.values()),
                    "group": group,
                    "lag": sum(p.lag for p in reader.lag(feed["topic"], group)),
                    "source": feed["source"],
                }
            )
    except Exception as exc:
        return {"address": settings.kafka_bootstrap, "ok": False, "error": str(exc)}
    finally:
        reader.close()
    if short:  # a broker that lost its log: the workers put the topics back
        return {"address": settings.kafka_bootstrap, "ok": False, "error": "; ".join(short)}
    return {"address": settings.kafka_bootstrap, "ok": True}


async def _check_opensearch(settings: Settings) -> dict[str, Any]:
    assert settings.opensearch_url
    index = OpenSearchIndex(
        settings.opensearch_url,
        settings.index_alias,
        security=OpenSearchSecurity.from_settings(settings),
    )
    try:
        generation = await index.live_generation()
        count = await index.count()
    except Exception as exc:
        return {"address": settings.opensearch_url, "ok": False, "error": str(exc)}
    finally:
        await index.close()
    if generation is None:  # a server that lost its indexes: the workers rebuild them
        return {
            "address": settings.opensearch_url,
            "ok": False,
            "error": f"the alias {settings.index_alias} is missing (no live generation)",
        }
    return {
        "address": settings.opensearch_url,
        "ok": True,
        "alias": settings.index_alias,
        "generation": generation,
        "chunks": count,
    }


def _check_redis(settings: Settings) -> dict[str, Any]:
    if not settings.redis_url:
        return {"address": None, "ok": False, "error": "GOVINDEX_REDIS_URL is not set"}
    try:
        version = redis_version(settings.redis_url)
    except Exception as exc:
        return {"address": settings.redis_url, "ok": False, "error": str(exc)}
    return {"address": settings.redis_url, "ok": True, "version": version}


def render_status(report: dict[str, Any]) -> str:
    lines = [f"namespace {report['namespace']}", "", "servers"]
    for name, info in report["servers"].items():
        mark = "ok  " if info.get("ok") else "DOWN"
        extra = ""
        if name == "postgres" and info.get("ok"):
            extra = (
                f"  PostgreSQL {info['version']}, {info['sources']} sources, "
                f"{info['active_documents']} active documents, {info['chunks']} chunks"
            )
            for generation in info.get("vector_generations", []):
                extra += f"\n{'':18}vectors {generation['model']} ({generation['state']})"
            if info.get("embedding_backlog"):
                extra += (
                    f"\n{'':18}{info['embedding_backlog']} chunks waiting for a vector "
                    "(not in the dense channel until embedded)"
                )
        elif name == "opensearch" and info.get("ok"):
            extra = (
                f"  alias {info['alias']} -> generation {info['generation']}, "
                f"{info['chunks']} chunks"
            )
        elif name == "redis" and info.get("ok"):
            extra = f"  Redis {info['version']}"
        elif not info.get("ok"):
            extra = f"  {info.get('error')}"
        restarts = (info.get("supervisor") or {}).get("restarts")
        if restarts:
            extra += f"  (restarted {restarts}x, last {info['supervisor']['last_restart']})"
        lines.append(f"  {mark} {name:<11} {info.get('address')}{extra}")
    lines += ["", "topics"]
    for topic in report["topics"]:
        lag = f"  lag {topic['lag']} ({topic['group']})" if "lag" in topic else ""
        lines.append(f"  {topic['topic']:<32} {topic['messages']:>7} messages{lag}")
    lines += [
        "",
        f"dead letters     {report['dead_letters']}",
        f"outbox unsent    {report['outbox_pending']}",
        f"events pending   {sum(e['pending'] for e in report['pending_events'])}"
        " (emitted, not yet applied)",
    ]
    for event in report["pending_events"]:
        again = (
            f", {event['republished']} re-published (last {event['last_republished']:%H:%M:%S})"
            if event["republished"] and event["last_republished"]
            else ""
        )
        lines.append(
            f"  {event['source']:<24} {event['pending']:>6} for the {event['awaits']}, "
            f"oldest {event['oldest_s']:.0f}s{again}"
        )
    lines.append(f"pending purges   {len(report['pending_purges'])}")
    for purge in report["pending_purges"]:
        err = f" last error: {purge['last_error']}" if purge["last_error"] else ""
        lines.append(
            f"  {purge['doc']} seq {purge['sequence']} ({purge['mode']}), "
            f"{purge['attempts']} failed attempts{err}"
        )
    return "\n".join(lines)
