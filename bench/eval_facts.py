"""Facts at a time: does the index answer relation, event-time and contradiction questions
exactly, with nothing a subject may not see?

The corpus (bench/corpus/facts/) is a small payments estate as its sources committed it:
a Backstage-style service catalog (owners, dependsOn) in two versions, an ownership
register with validity columns (a handover, an interim cover that overlaps the owner of
record, rows only HR or finance may see) in two versions, a deployment log committed in
three batches (each holding a deployment that finished minutes before its commit), a
handbook page stating an owner in frontmatter, and two incident documents with timelines.
Every version is published as a document event whose observed_at is its commit time
(commits.yaml), and the moment right after the indexer applied it is noted, so a label's
`known_at` can name "what the index held after that commit".

The labels (bench/eval/facts.yaml) give the exact answer of each question: the edges of
an entity at as_of, the deployments that finished in an event-time window (asked as
DEPLOYED_AS edges filtered by event_time, and as a search of fact chunks with
`filters.event_from/event_to`), and the pairs of edges that must name each other in
`contradicts`. It prints figures and asserts nothing; it exits non-zero only when it
could not run (the stack failed, or a label does not fit the corpus).

    make eval-facts

(Over 450 lines on purpose: one script a reader follows top to bottom, from the labels'
check through replaying the history commit by commit to the three ways of asking and
the report.)
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from govindex.control.bootstrap import prepare
from govindex.control.workers import Workers
from govindex.core import events
from govindex.core.envelope import encode_document_event
from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex
from govindex.core.logs import configure_logging
from govindex.core.ports import DocumentKey
from govindex.core.records import SourceManifest
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.composition import Runtime
from govindex_client._types import RELATIONS
from indexer.facts import parse_facts
from indexer.frontmatter import Frontmatter, split_frontmatter
from reader.app import read_service
from reader.models import Hit, RelationEdge, RelationsRequest, RelationsResponse, SearchRequest
from reader.service import ReadService

HERE = Path(__file__).parent
CORPUS = HERE / "corpus" / "facts"
LABELS = HERE / "eval" / "facts.yaml"
TENANT = "eval"
DEPLOYMENTS = ("deploys", "deployments.csv")  # the document whose rows are deployments
MEDIA = {".csv": "text/csv", ".yaml": "application/yaml", ".md": "text/markdown"}
Edge = tuple[str, str, str]
Pair = frozenset[Edge]

# --- corpus and labels ----------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    id: str
    at: datetime
    source: str
    files: Mapping[str, Path]  # doc id -> the corpus file holding this version


@dataclass(frozen=True)
class Question:
    """One labelled question; `expected` holds edges, deployment ids or pairs of edges."""

    kind: str  # relations, events or contradictions
    id: str
    q: str
    as_of: datetime
    known_at: str | None
    principals: tuple[str, ...]
    purpose: str
    entity: str | None
    relation: str | None
    direction: str
    window: tuple[datetime, datetime] | None
    expected: frozenset[Any]


def edge(text: str) -> Edge:
    subject, relation, obj = text.split()
    return subject, relation, obj


EXPECTED: dict[str, Callable[[list[Any]], frozenset[Any]]] = {
    "relations": lambda found: frozenset(edge(e) for e in found),
    "events": frozenset,
    "contradictions": lambda found: frozenset(frozenset(edge(e) for e in p) for p in found),
}
when = datetime.fromisoformat


def load_questions(path: Path) -> tuple[list[Question], list[str], str]:
    data = yaml.safe_load(path.read_text())
    defaults = data["defaults"]
    questions = []
    for kind, expected in EXPECTED.items():
        for q in data[kind]:
            window = (when(q["event_from"]), when(q["event_to"])) if kind == "events" else None
            questions.append(
                Question(
                    kind=kind,
                    id=q["id"],
                    q=q["q"],
                    as_of=when(q["as_of"]),
                    known_at=q.get("known_at"),
                    principals=tuple(q.get("principals", defaults["principals"])),
                    purpose=q.get("purpose", defaults["purpose"]),
                    entity=q.get("entity"),
                    relation=q.get("relation"),
                    direction=q.get("direction", "both"),
                    window=window,
                    expected=expected(q["expected"]),
                )
            )
    return questions, list(data["services"]), str(defaults["search_query"])


def load_corpus() -> tuple[dict[str, SourceManifest], list[Commit]]:
    manifests = {}
    for file in sorted((CORPUS / "manifests").glob("*.yaml")):
        m = SourceManifest.model_validate(yaml.safe_load(file.read_text()))
        manifests[m.source_id] = m
    raw = yaml.safe_load((CORPUS / "commits.yaml").read_text())["commits"]
    commits = [
        Commit(c["id"], when(c["at"]), c["source"], {d: CORPUS / f for d, f in c["files"].items()})
        for c in raw
    ]
    return manifests, commits


def label_problems(
    questions: Sequence[Question], manifests: Mapping[str, SourceManifest], commits: list[Commit]
) -> list[str]:
    """What cannot be right before the stack starts: a commit out of order or naming a
    file or source that is not there, a corpus file no commit holds, a version the indexer
    would refuse (its own mapping and frontmatter rules), a `known_at` naming no commit, an
    edge of a relation outside the vocabulary or naming an id no corpus file holds."""
    problems = []
    ids = [c.id for c in commits]
    if len(set(ids)) != len(ids) or [c.at for c in commits] != sorted(c.at for c in commits):
        problems.append("commits.yaml: ids repeat or commits are not in time order")
    held: Counter[Path] = Counter()
    texts = []
    for c in commits:
        manifest = manifests.get(c.source)
        for doc, path in c.files.items():
            held[path.resolve()] += 1
            if manifest is None or not path.is_file():
                problems.append(f"{c.id}: no source {c.source} or no file {path.name}")
                continue
            text = path.read_text()
            texts.append(text)
            try:
                if (mapping := manifest.fact_mapping(doc)) is not None:
                    parse_facts(mapping, doc, text, document_from=c.at, document_to=None)
                else:
                    Frontmatter.of(split_frontmatter(text)[0])
            except Exception as exc:
                problems.append(f"{c.id}: {c.source}/{doc} would be refused: {exc}")
    for source in manifests:
        for file in sorted((CORPUS / source).rglob("*.*")):
            if held[file.resolve()] != 1:
                problems.append(f"{file.relative_to(CORPUS)}: in {held[file.resolve()]} commits")
    corpus = "\n".join(texts)
    for q in questions:
        if q.known_at is not None and q.known_at not in ids:
            problems.append(f"{q.id}: known_at {q.known_at!r} names no commit")
        found = q.expected if q.kind != "contradictions" else frozenset().union(*q.expected)
        for item in found:
            subject, relation, obj = item if isinstance(item, tuple) else ("", "", item)
            if relation and relation not in RELATIONS:
                problems.append(f"{q.id}: {relation} is not a stored relation")
            for entity in (e for e in (subject, obj, q.entity or "") if e):
                name = entity.split(":", 1)[1].split("/")[-1].removesuffix(".md")
                if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", corpus):
                    problems.append(f"{q.id}: no corpus file names {entity}")
    return problems


# --- ingesting the history ------------------------------------------------------------


async def ingest(
    rt: Runtime, manifests: Mapping[str, SourceManifest], commits: Sequence[Commit]
) -> dict[str, datetime]:
    """Each commit's versions as document events, one commit at a time; returns, per
    commit, a moment after the indexer applied it and before the next was published."""
    for m in manifests.values():
        await rt.registry.register(m)
    publisher = await rt.publisher()
    sequences: Counter[tuple[str, str]] = Counter()
    known = {}
    for c in commits:
        for doc, path in c.files.items():
            sequences[(c.source, doc)] += 1
            sequence = sequences[(c.source, doc)]
            text = path.read_text()
            payload = DocumentChanged(
                tenant_id=TENANT,
                source_id=c.source,
                doc_id=doc,
                path=doc,
                source_version="git:" + hashlib.sha1(c.id.encode()).hexdigest(),  # noqa: S324
                sequence=sequence,
                observed_at=c.at,
                content_hash=sha256_hex(text),
                content=text,
                media_type=MEDIA[path.suffix],
            )
            kind = events.DOCUMENT_CREATED if sequence == 1 else events.DOCUMENT_UPDATED
            record = encode_document_event(kind, payload, op=f"{kind}:{sequence}", time=c.at)
            await publisher.publish(rt.settings.topics.documents, record)
        for doc in c.files:
            await applied(rt, DocumentKey(TENANT, c.source, doc), sequences[(c.source, doc)])
        known[c.id] = datetime.now(UTC)
        await asyncio.sleep(0.01)  # the next commit is recorded strictly after this moment
    await rt.index.refresh()
    return known


async def applied(rt: Runtime, key: DocumentKey, sequence: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while await rt.chunks.last_sequence(key) < sequence:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the indexer did not apply {key.source_id}/{key.doc_id} version {sequence} "
                "(dead-lettered? `govindex dead-letters list` names why)"
            )
        await asyncio.sleep(0.05)


# --- asking ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One question asked one way: what came back, against what was expected."""

    question: Question
    way: str  # the category it is counted in
    returned: frozenset[Any]
    copies: int  # items returned beyond one per answer, restating it from the same document
    corroborated: int  # ... and from another document
    seconds: float

    @property
    def right(self) -> int:
        return len(self.returned & self.question.expected)


def triple(e: RelationEdge) -> Edge:
    return e.subject, e.relation, e.object


def scoped(q: Question, known: Mapping[str, datetime]) -> dict[str, Any]:
    return {
        "tenant": TENANT,
        "subject": {"principals": list(q.principals)},
        "purpose": q.purpose,
        "as_of": q.as_of,
        "known_at": known[q.known_at] if q.known_at else None,
    }


async def relations(
    service: ReadService, q: Question, known: Mapping[str, datetime], **ask: Any
) -> tuple[RelationsResponse, float]:
    body = {"entity": q.entity, "relation": q.relation, "direction": q.direction, **ask}
    request = RelationsRequest.model_validate({**scoped(q, known), "limit": 500, **body})
    started = time.perf_counter()
    response = await service.relations(request)
    return response, time.perf_counter() - started


def restated(items: Sequence[tuple[Any, str]]) -> tuple[int, int]:
    """(copies from the same document, copies from other documents) beyond one per answer,
    for (answer, document) pairs."""
    docs: defaultdict[Any, list[str]] = defaultdict(list)
    for answer, doc in items:
        docs[answer].append(doc)
    same = sum(len(d) - len(set(d)) for d in docs.values())
    return same, sum(len(set(d)) - 1 for d in docs.values())


def held_in(e: RelationEdge) -> str:
    return f"{e.evidence.source_id}/{e.evidence.doc_id}"


async def ask_relations(
    service: ReadService, q: Question, known: Mapping[str, datetime]
) -> Outcome:
    response, seconds = await relations(service, q, known)
    same, other = restated([(triple(e), held_in(e)) for e in response.edges])
    returned = frozenset(triple(e) for e in response.edges)
    return Outcome(q, "relation at a time", returned, same, other, seconds)


async def ask_contradictions(
    service: ReadService, q: Question, known: Mapping[str, datetime]
) -> Outcome:
    """The pairs the response marks: each edge with every edge its `contradicts` names. An
    id outside the response is looked up among its subject's edges, asked the same way."""
    response, seconds = await relations(service, q, known)
    by_id = {e.edge_id: triple(e) for e in response.edges}
    for e in response.edges:
        if any(other not in by_id for other in e.contradicts):
            around, _ = await relations(
                service, q, known, entity=e.subject, relation=e.relation, direction="out"
            )
            by_id.update({x.edge_id: triple(x) for x in around.edges})
    pairs = frozenset(
        frozenset({triple(e), by_id.get(other, ("?", "?", other))})
        for e in response.edges
        for other in e.contradicts
    )
    return Outcome(q, "contradictions", pairs, 0, 0, seconds)


async def ask_events(
    service: ReadService,
    q: Question,
    known: Mapping[str, datetime],
    services: Sequence[str],
    query: str,
) -> list[Outcome]:
    assert q.window is not None
    start, end = q.window
    found: list[tuple[Any, str]] = []
    seconds = 0.0
    for entity in services:
        response, took = await relations(
            service, q, known, entity=entity, relation="DEPLOYED_AS", direction="out"
        )
        seconds += took
        found += [
            (e.object, held_in(e))
            for e in response.edges
            if e.event_time is not None and start <= e.event_time < end
        ]
    by_edges = Outcome(
        q, "event window: edges", frozenset(a for a, _ in found), *restated(found), seconds
    )
    request = SearchRequest.model_validate(
        {
            **scoped(q, known),
            "query": query,
            "filters": {"kinds": ["fact"], "event_from": start, "event_to": end},
            "window": 500,
            "limit": 200,
            "cache": "bypass",
        }
    )
    started = time.perf_counter()
    hits = (await service.search(request)).hits
    seconds = time.perf_counter() - started
    rows = [(row_of(h), f"{h.anchor.source_id}/{h.anchor.doc_id}") for h in hits]
    by_search = Outcome(
        q, "event window: search", frozenset(a for a, _ in rows), *restated(rows), seconds
    )
    return [by_edges, by_search]


def row_of(hit: Hit) -> str:
    """What a hit is: a deployment row as its deployment's id, anything else by its place."""
    a = hit.anchor
    if (a.source_id, a.doc_id) == DEPLOYMENTS:
        return "deployment:" + next(csv.reader([hit.text.splitlines()[0]]))[0]
    return f"{a.source_id}/{a.doc_id}#L{a.line_start}"


# --- reporting ------------------------------------------------------------------------

WAYS = ("relation at a time", "event window: edges", "event window: search", "contradictions")


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole else "-"


def report(outcomes: Sequence[Outcome]) -> None:
    print("\nPer category (micro-averaged over the questions' answers; contradictions: over pairs)")
    columns = "questions expected returned precision recall exact copies other-docs p50-ms"
    print(f"{'':<24}" + "".join(f"{c:>11}" for c in columns.split()))
    for way in WAYS:
        group = [o for o in outcomes if o.way == way]
        right = sum(o.right for o in group)
        returned = sum(len(o.returned) for o in group)
        expected = sum(len(o.question.expected) for o in group)
        exact = sum(o.returned == o.question.expected for o in group)
        cells = [
            str(len(group)),
            str(expected),
            str(returned),
            _share(right, returned),
            _share(right, expected),
            _share(exact, len(group)),
            str(sum(o.copies for o in group)),
            str(sum(o.corroborated for o in group)),
            f"{statistics.median(o.seconds for o in group) * 1000:.0f}",
        ]
        print(f"{way:<24}" + "".join(f"{c:>11}" for c in cells))
    print(
        "copies: an answer returned again from the same document (another version's copy of "
        "its row); other-docs: returned again, stated by another document"
    )
    wrong = [o for o in outcomes if o.returned != o.question.expected]
    print(f"\nAsks answered other than labelled: {len(wrong)} of {len(outcomes)}")
    for o in wrong:
        q = o.question
        when = f"as_of {q.as_of:%Y-%m-%dT%H:%MZ}" + (
            f", known_at {q.known_at}" if q.known_at else ""
        )
        print(f"  {q.id} [{o.way}] {q.q} ({when}; {', '.join(q.principals)})")
        print(f"    expected: {_shown(q.expected)}")
        print(f"    returned: {_shown(o.returned)}")
        if missing := q.expected - o.returned:
            print(f"    missing:  {_shown(missing)}")
        if extra := o.returned - q.expected:
            print(f"    extra:    {_shown(extra)}")


def _shown(items: frozenset[Any]) -> str:
    def one(item: Any) -> str:
        if isinstance(item, frozenset):
            return "{" + " | ".join(sorted(one(e) for e in item)) + "}"
        return " ".join(item) if isinstance(item, tuple) else str(item)

    return ", ".join(sorted(one(i) for i in items)) or "(none)"


# --- running --------------------------------------------------------------------------


async def evaluate(
    rt: Runtime,
    questions: Sequence[Question],
    known: Mapping[str, datetime],
    services: Sequence[str],
    query: str,
) -> list[Outcome]:
    service = read_service(rt)
    outcomes: list[Outcome] = []
    for q in questions:
        if q.kind == "relations":
            outcomes.append(await ask_relations(service, q, known))
        elif q.kind == "events":
            outcomes += await ask_events(service, q, known, services, query)
        else:
            outcomes.append(await ask_contradictions(service, q, known))
    return outcomes


async def main() -> int:
    configure_logging(level="WARNING")
    questions, services, query = load_questions(LABELS)
    manifests, commits = load_corpus()
    problems = label_problems(questions, manifests, commits)
    if problems:
        print("the labels do not fit the corpus:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    kinds = Counter(q.kind for q in questions)
    versions = sum(len(c.files) for c in commits)
    print(
        f"{kinds['relations']} relation, {kinds['events']} event-window and "
        f"{kinds['contradictions']} contradiction questions; {versions} document versions "
        f"in {len(commits)} commits from {len(manifests)} sources"
    )
    begun = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="govindex-eval-facts-") as tmp:
        root = Path(tmp)
        stack = EmbeddedStack(root / "state", namespace="evalfacts", durable=False)
        print("starting the embedded stack ...", flush=True)
        started = time.perf_counter()
        settings = Settings(state_dir=root / "state", namespace="evalfacts").model_copy(
            update=stack.start()
        )
        try:
            await prepare(settings)
            stack_s = time.perf_counter() - started
            async with Runtime(settings) as rt:
                workers = Workers(rt, run=("indexer", "purger"))
                await workers.start()
                try:
                    started = time.perf_counter()
                    known = await ingest(rt, manifests, commits)
                    ingest_s = time.perf_counter() - started
                    print(
                        f"stack up in {stack_s:.1f}s; history ingested commit by commit and "
                        f"indexed in {ingest_s:.1f}s",
                        flush=True,
                    )
                    started = time.perf_counter()
                    outcomes = await evaluate(rt, questions, known, services, query)
                    eval_s = time.perf_counter() - started
                finally:
                    await workers.stop()
        finally:
            stack.stop()
    report(outcomes)
    print(
        f"\ntiming: stack {stack_s:.1f}s, ingestion {ingest_s:.1f}s, {len(outcomes)} asks in "
        f"{eval_s:.1f}s, total {time.perf_counter() - begun:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
