"""Pack quality for incident investigations: does a pack hold the evidence an answer needs?

The corpus (bench/corpus/investigations/) holds three incident investigations across six
sources of different trust: a service catalog with ownership records that overlap in time
and policies in two versions, runbooks in three versions of which one is valid at the
incident, deployment records, incident documents with timelines, findings, root causes and
action items, wiki copies (near-duplicates), and untrusted e-mails and ticket comments.
The labels (bench/eval/packs.yaml) name, per question, the evidence the answer requires
(document, section, phrase, evidence type) and the documents that must stay out.

Every question is packed with one fixed budget, in the full configuration and once per
ablation (a named set of request overrides), all in one process on one embedded stack.
It prints figures, it asserts nothing; it exits non-zero only when it could not run.

    make eval-packs

(Over 450 lines on purpose: one script a reader follows top to bottom, from the labels'
check through the configurations and measures to the report.)
"""

from __future__ import annotations

import asyncio
import re
import statistics
import sys
import tempfile
import time
import types
import typing
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from govindex.control.bootstrap import prepare
from govindex.control.workers import Workers
from govindex.core.logs import configure_logging
from govindex.core.records import ChunkDraft, SourceManifest
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.composition import Runtime
from indexer.frontmatter import Frontmatter, split_frontmatter
from indexer.parsers.markdown import MarkdownParser
from ingest.app import sync_source
from reader import text as textual
from reader.access import read_access
from reader.app import read_service
from reader.models import CHANNELS, Budget, Pack, PackItem, PackRequest
from reader.service import ReadService

HERE = Path(__file__).parent
CORPUS = HERE / "corpus" / "investigations"
LABELS = HERE / "eval" / "packs.yaml"
TENANT = "eval"
# One budget for every question: what an agent's context step can afford per question.
BUDGET = {"max_tokens": 1500, "max_items": 12, "max_per_document": 3}
SHINGLE = 5  # words per shingle for the redundancy measure
NEAR_DUPLICATE = 0.8  # Jaccard of shingle sets at or above which an item repeats an earlier one

# --- labels -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence the answer needs: a chunk of `doc` (`source/doc_id`), under
    `section` when given, holding `phrase` when given."""

    doc: str
    type: str
    section: str | None = None
    phrase: str | None = None


@dataclass(frozen=True)
class Forbidden:
    doc: str
    why: str


@dataclass(frozen=True)
class Question:
    id: str
    investigation: str
    q: str
    as_of: datetime
    entities: tuple[str, ...]
    required: tuple[Evidence, ...]
    forbidden: tuple[Forbidden, ...]
    principals: tuple[str, ...]
    purpose: str


def load_questions(path: Path) -> tuple[list[Question], dict[str, str]]:
    data = yaml.safe_load(path.read_text())
    defaults = data.get("defaults", {})
    questions = [
        Question(
            id=q["id"],
            investigation=q["investigation"],
            q=q["q"],
            as_of=datetime.fromisoformat(q["as_of"]),
            entities=tuple(q.get("entities", ())),
            required=tuple(Evidence(**e) for e in q["required"]),
            forbidden=tuple(Forbidden(**f) for f in q.get("forbidden", ())),
            principals=tuple(q.get("principals", defaults["principals"])),
            purpose=q.get("purpose", defaults["purpose"]),
        )
        for q in data["questions"]
    ]
    return questions, dict(data["investigations"])


_MARKUP = re.compile(r"[`*]")
_SPACE = re.compile(r"\s+")


def normal(text: str) -> str:
    """Phrases match regardless of case, inline code marks, emphasis and line breaks."""
    return _SPACE.sub(" ", _MARKUP.sub("", text)).strip().lower()


def load_manifests() -> dict[str, SourceManifest]:
    """The corpus's source manifests, each pointed at its folder inside the corpus."""
    manifests = {}
    for file in sorted((CORPUS / "manifests").glob("*.yaml")):
        m = SourceManifest.model_validate(yaml.safe_load(file.read_text()))
        assert m.folder is not None
        folder = m.folder.model_copy(update={"path": str((CORPUS / m.folder.path).resolve())})
        manifests[m.source_id] = m.model_copy(update={"folder": folder})
    return manifests


def corpus_file(manifests: Mapping[str, SourceManifest], doc: str) -> Path:
    source, _, doc_id = doc.partition("/")
    folder = manifests[source].folder
    assert folder is not None
    return Path(folder.path) / doc_id


def label_problems(
    questions: Sequence[Question], manifests: Mapping[str, SourceManifest]
) -> list[str]:
    """Labels that cannot be right: an unknown document, a phrase no chunk of it holds
    (as the indexer's parser cuts it), frontmatter the indexer would refuse. Checked before
    the stack starts, so a figure never rests on a label nothing could satisfy."""
    problems = []
    for q in questions:
        for ev in q.required:
            path = corpus_file(manifests, ev.doc) if ev.doc.split("/")[0] in manifests else None
            if path is None or not path.is_file():
                problems.append(f"{q.id}: no document {ev.doc}")
            elif not any(_holds(c, ev) for c in MarkdownParser().parse(path.read_text()).chunks):
                where = f" under {ev.section!r}" if ev.section else ""
                problems.append(f"{q.id}: no chunk of {ev.doc}{where} holds {ev.phrase!r}")
        for fb in q.forbidden:
            source = fb.doc.split("/")[0]
            if source not in manifests or not corpus_file(manifests, fb.doc).is_file():
                problems.append(f"{q.id}: no forbidden document {fb.doc}")
    for m in manifests.values():
        assert m.folder is not None
        for file in Path(m.folder.path).rglob("*.md"):
            try:
                fm = Frontmatter.of(split_frontmatter(file.read_text())[0])
                start, end = fm.time("valid_from"), fm.time("valid_to")
            except Exception as exc:
                problems.append(f"{m.source_id}/{file.name}: {exc}")
                continue
            if start is None:
                problems.append(f"{m.source_id}/{file.name}: no valid_from")
            elif end is not None and end <= start:
                problems.append(f"{m.source_id}/{file.name}: valid_to not after valid_from")
    return problems


def _holds(chunk: ChunkDraft, ev: Evidence) -> bool:
    headings = {h.lower() for h in chunk.heading_path}
    return (ev.section is None or ev.section.lower() in headings) and (
        ev.phrase is None or normal(ev.phrase) in normal(chunk.text)
    )


# --- configurations ---------------------------------------------------------------------

# An override sets a request field by dotted path; a callable value is computed per
# question, and "max" on a budget field is that field's upper bound. A field the request
# model does not have makes the row "not available in this build", so a selection feature
# still to come is one line here.
# The evidence type a deployment stamps (the corpus manifests' evidence_rules and the
# chunk kinds) that answers each kind of required evidence the labels name.
STAMPED: dict[str, str] = {
    "deployment_record": "deployment_record",
    "error_first_seen": "timeline_entry",
    "timeline_entry": "timeline_entry",
    "mechanism": "root_cause",
    "root_cause": "root_cause",
    "finding": "finding",
    "action_item": "action_item",
    "owner_at_as_of": "ownership_record",
    "runbook_valid_at_as_of": "runbook",
    "service_catalog": "service_catalog",
    "policy": "policy",
}
Value = object | Callable[[Question], object]
FULL = "full"
ABLATIONS: dict[str, dict[str, Value]] = {
    "dedup off": {"dedup_threshold": 0},
    "hydration off": {"hydration.parent": False, "hydration.neighbours": 0},
    "max_per_document max": {"budget.max_per_document": "max"},
    "graph channel off": {"channels": [c for c in CHANNELS if c != "graph"]},
    "dense channel off": {"channels": [c for c in CHANNELS if c != "dense"]},
    "MMR diversity": {"diversity.mmr_lambda": 0.7},
    "min distinct documents": {"diversity.min_documents": 4},
    "max per parent 1": {"diversity.max_per_parent": 1},
    "required evidence": {
        "required_evidence": lambda q: [
            {"type": t, "min": 1} for t in sorted({STAMPED[e.type] for e in q.required})
        ]
    },
}


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The pydantic model a field holds (through `X | None`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        for arg in typing.get_args(annotation):
            if (found := _model_in(arg)) is not None:
                return found
    return None


def field_exists(path: str, model: type[BaseModel] = PackRequest) -> bool:
    current: type[BaseModel] | None = model
    for part in path.split("."):
        if current is None:
            return True  # a mapping or a plain value: nothing further to check
        info = current.model_fields.get(part)
        if info is None:
            return False
        current = _model_in(info.annotation)
    return True


def field_max(model: type[BaseModel], name: str) -> int:
    """The upper bound a model puts on an integer field (its `le`)."""
    for meta in model.model_fields[name].metadata:
        if (bound := getattr(meta, "le", None)) is not None:
            return int(bound)
    raise LookupError(f"{model.__name__}.{name} has no upper bound")


def missing_fields(overrides: Mapping[str, Value]) -> list[str]:
    return [p for p in overrides if not field_exists(p)]


def base_request(q: Question) -> dict[str, Any]:
    return {
        "tenant": TENANT,
        "subject": {"principals": list(q.principals)},
        "purpose": q.purpose,
        "as_of": q.as_of.isoformat(),
        "query": q.q,
        "entities": list(q.entities),
        "budget": dict(BUDGET),
        "cache": "bypass",
    }


def request_for(q: Question, overrides: Mapping[str, Value]) -> PackRequest:
    body = base_request(q)
    for path, value in overrides.items():
        *parents, leaf = path.split(".")
        target = body
        for part in parents:
            target = target.setdefault(part, {})
        if value == "max" and parents == ["budget"]:
            value = field_max(Budget, leaf)
        target[leaf] = value(q) if callable(value) else value
    return PackRequest.model_validate(body)


# --- measuring one pack -------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """What a pack holds of one chunk: an item's own text or one of its hydrated chunks."""

    doc: str
    headings: tuple[str, ...]
    text: str
    tokens: int


def pieces(item: PackItem) -> list[Piece]:
    anchor = item.anchor
    own = Piece(
        f"{anchor.source_id}/{anchor.doc_id}",
        tuple(anchor.heading_path),
        item.text,
        textual.tokens(item.text),
    )
    found = [own]
    for h in item.hydrated:
        a = h.anchor
        tokens = getattr(h, "tokens", None) or textual.tokens(h.text)
        found.append(Piece(f"{a.source_id}/{a.doc_id}", tuple(a.heading_path), h.text, tokens))
    return found


def matches(piece: Piece, ev: Evidence) -> bool:
    if piece.doc != ev.doc:
        return False
    if ev.section is not None and ev.section.lower() not in {h.lower() for h in piece.headings}:
        return False
    return ev.phrase is None or normal(ev.phrase) in normal(piece.text)


def shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    if len(words) < SHINGLE:
        return frozenset([tuple(words)])
    return frozenset(tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1))


def jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def docs_in(pack: Pack) -> set[str]:
    """Every document the pack cites: items, hydrated chunks and corroborating copies."""
    found = set()
    for item in pack.items:
        found.add(f"{item.anchor.source_id}/{item.anchor.doc_id}")
        found.update(f"{h.anchor.source_id}/{h.anchor.doc_id}" for h in item.hydrated)
        found.update(f"{c.source_id}/{c.doc_id}" for c in getattr(item, "corroboration", ()))
    return found


@dataclass
class Measure:
    """One pack's figures; pooled over questions by `Totals`."""

    question: Question
    found: list[bool]
    found_in_copies: list[bool]  # found, or held only as a corroborating copy of an item
    items: int
    matching: int
    used: int
    redundant: int
    evidence: int
    anchors_ok: int
    spans_ok: int
    forbidden: list[Forbidden]
    documents: int
    untrusted: int
    conflict_flag: bool
    omissions: Counter[str] | None
    seconds: float


async def measure(
    service: ReadService,
    q: Question,
    request: PackRequest,
    manifests: Mapping[str, SourceManifest],
    texts: Mapping[str, str],
) -> Measure:
    started = time.perf_counter()
    pack = await service.pack(request)
    seconds = time.perf_counter() - started
    found = [False] * len(q.required)
    copies = [False] * len(q.required)
    matching = redundant = evidence = 0
    earlier: list[frozenset[tuple[str, ...]]] = []
    for item in pack.items:
        held = pieces(item)
        hit = False
        for piece in held:
            useful = [i for i, ev in enumerate(q.required) if matches(piece, ev)]
            for i in useful:
                found[i] = True
            if useful:
                evidence += piece.tokens
                hit = True
        matching += hit
        for c in getattr(item, "corroboration", ()):
            copy = Piece(f"{c.source_id}/{c.doc_id}", tuple(c.heading_path), item.text, 0)
            for i, ev in enumerate(q.required):
                copies[i] = copies[i] or matches(copy, ev)
        own = shingles(item.text)
        if any(jaccard(own, other) >= NEAR_DUPLICATE for other in earlier):
            redundant += item.tokens
        earlier.append(own)
    present = docs_in(pack)
    trust = {s: m.trust_level.value for s, m in manifests.items()}
    untrusted = sum(
        (getattr(i, "trust_level", None) or trust.get(i.anchor.source_id)) == "untrusted"
        for i in pack.items
    )
    flags = [f for i in pack.items for f in i.flags]
    raw = getattr(pack.manifest, "omissions", None)
    omissions = Counter(str(getattr(o, "stage", "?")) for o in raw) if raw is not None else None
    anchors_ok, spans_ok = await reopen(service, q, pack, texts)
    return Measure(
        question=q,
        found=found,
        found_in_copies=[a or b for a, b in zip(found, copies, strict=True)],
        items=len(pack.items),
        matching=matching,
        used=pack.used_tokens,
        redundant=redundant,
        evidence=evidence,
        anchors_ok=anchors_ok,
        spans_ok=spans_ok,
        forbidden=[f for f in q.forbidden if f.doc in present],
        documents=len({f"{i.anchor.source_id}/{i.anchor.doc_id}" for i in pack.items}),
        untrusted=untrusted,
        conflict_flag=any(str(f.kind).startswith("relation") for f in flags),
        omissions=omissions,
        seconds=seconds,
    )


async def reopen(
    service: ReadService, q: Question, pack: Pack, texts: Mapping[str, str]
) -> tuple[int, int]:
    """Items whose anchor reopens (through the gates, at the pack's as_of) to the item's
    exact text and hash; and items whose anchor span cut from the source file is that text."""
    access = read_access(
        tenant=TENANT, principals=q.principals, scopes=(), purpose=q.purpose, as_of=pack.as_of
    )
    anchors = spans = 0
    for item in pack.items:
        a = item.anchor
        opened: Any = await service.chunk(a.chunk_id, access)
        chunk = getattr(opened, "chunk", opened)  # the chunk, or its facts holding it
        anchors += (
            chunk is not None and chunk.text == item.text and chunk.content_hash == a.content_hash
        )
        source = texts.get(f"{a.source_id}/{a.doc_id}", "")
        spans += source[a.char_start : a.char_end] == item.text
    return anchors, spans


# --- pooling and printing -----------------------------------------------------------------


@dataclass
class Totals:
    measures: list[Measure] = field(default_factory=list)

    def of(self, keep: Callable[[Measure], bool]) -> Totals:
        return Totals([m for m in self.measures if keep(m)])

    def _sum(self, name: str) -> int:
        return sum(int(getattr(m, name)) for m in self.measures)

    @property
    def recall(self) -> float:
        found = [f for m in self.measures for f in m.found]
        return sum(found) / len(found) if found else float("nan")

    @property
    def recall_with_copies(self) -> float:
        found = [f for m in self.measures for f in m.found_in_copies]
        return sum(found) / len(found) if found else float("nan")

    @property
    def precision(self) -> float:
        return _share(self._sum("matching"), self._sum("items"))

    @property
    def redundancy(self) -> float:
        return _share(self._sum("redundant"), self._sum("used"))

    @property
    def efficiency(self) -> float:
        return _share(self._sum("evidence"), self._sum("used"))

    @property
    def anchors(self) -> float:
        return _share(self._sum("anchors_ok"), self._sum("items"))

    @property
    def spans(self) -> float:
        return _share(self._sum("spans_ok"), self._sum("items"))

    @property
    def forbidden(self) -> int:
        return sum(len(m.forbidden) for m in self.measures)

    @property
    def items(self) -> float:
        return statistics.fmean(m.items for m in self.measures)

    @property
    def tokens(self) -> float:
        return statistics.fmean(m.used for m in self.measures)

    @property
    def documents(self) -> float:
        return statistics.fmean(m.documents for m in self.measures)

    @property
    def p50_ms(self) -> float:
        return statistics.median(m.seconds for m in self.measures) * 1000

    def type_recall(self, kind: str) -> float:
        found = [
            f
            for m in self.measures
            for f, ev in zip(m.found, m.question.required, strict=True)
            if ev.type == kind
        ]
        return sum(found) / len(found) if found else float("nan")


def _share(part: int, whole: int) -> float:
    return part / whole if whole else float("nan")


METRICS: list[tuple[str, str, str]] = [  # column, Totals attribute, format
    ("recall", "recall", ".3f"),
    ("precision", "precision", ".3f"),
    ("redundancy", "redundancy", ".3f"),
    ("efficiency", "efficiency", ".3f"),
    ("anchors", "anchors", ".3f"),
    ("forbidden", "forbidden", "d"),
    ("items", "items", ".1f"),
    ("tokens", "tokens", ".0f"),
    ("docs", "documents", ".1f"),
    ("p50 ms", "p50_ms", ".0f"),
]


def _row(name: str, cells: Iterable[str], width: int = 24) -> str:
    return f"{name:<{width}}" + "".join(f"{c:>11}" for c in cells)


def report_ablations(results: Mapping[str, Totals | str]) -> None:
    print(f"\nConfigurations ({FULL}: absolute; the others: difference from {FULL})")
    print(_row("", [c for c, _, _ in METRICS]))
    full = results[FULL]
    assert isinstance(full, Totals)
    for name, totals in results.items():
        if isinstance(totals, str):
            print(f"{name:<24}{totals}")
            continue
        cells = []
        for _, attr, fmt in METRICS:
            value = getattr(totals, attr)
            if name == FULL:
                cells.append(format(value, fmt))
            else:
                delta = value - getattr(full, attr)
                cells.append(format(delta, "+" + fmt))
        print(_row(name, cells))


def report_investigations(full: Totals, investigations: Mapping[str, str]) -> None:
    print(f"\nPer investigation ({FULL} configuration)")
    columns = ["questions", *(c for c, _, _ in METRICS[:6]), "span"]
    print(_row("", columns, 16))
    groups = [(i, full.of(partial(_about, i))) for i in investigations]
    for name, t in [*groups, ("overall", full)]:
        cells = [str(len(t.measures))]
        cells += [format(getattr(t, attr), fmt) for _, attr, fmt in METRICS[:6]]
        cells.append(format(t.spans, ".3f"))
        print(_row(name, cells, 16))


def _about(investigation: str, m: Measure) -> bool:
    return m.question.investigation == investigation


def report_types(results: Mapping[str, Totals | str]) -> None:
    ran = {k: v for k, v in results.items() if isinstance(v, Totals)}
    full = ran[FULL]
    kinds = Counter(ev.type for m in full.measures for ev in m.question.required)
    print("\nRequired-evidence recall by evidence type (items labelled; per configuration)")
    names = list(ran)
    print(_row("", ["items", *(n[:10] for n in names)]))
    for kind, n in sorted(kinds.items()):
        print(_row(kind, [str(n), *(f"{ran[c].type_recall(kind):.3f}" for c in names)]))


def report_details(full: Totals) -> None:
    by_why = Counter(f.why for m in full.measures for f in m.forbidden)
    print(
        f"\nForbidden documents in {FULL} packs: {full.forbidden}"
        + (" (" + ", ".join(f"{w} {n}" for w, n in sorted(by_why.items())) + ")" if by_why else "")
    )
    for m in full.measures:
        for f in m.forbidden:
            print(f"  {m.question.id} {f.doc} ({f.why})")
    missed = [
        (m.question.id, ev)
        for m in full.measures
        for f, ev in zip(m.found, m.question.required, strict=True)
        if not f
    ]
    print(
        f"Required evidence missed in {FULL} packs: {len(missed)}; recall counting the copies "
        f"folded into an item as its corroboration: {full.recall_with_copies:.3f}"
    )
    for qid, ev in missed:
        where = f" / {ev.section}" if ev.section else ""
        print(f"  {qid} {ev.type}: {ev.doc}{where}" + (f" ({ev.phrase!r})" if ev.phrase else ""))
    owners = full.of(lambda m: any(e.type == "owner_at_as_of" for e in m.question.required))
    flagged = sum(m.conflict_flag for m in owners.measures)
    print(
        f"Ownership questions whose pack flags the overlapping owners: "
        f"{flagged}/{len(owners.measures)}"
    )
    untrusted = sum(m.untrusted for m in full.measures)
    print(f"Items from untrusted sources: {untrusted} of {sum(m.items for m in full.measures)}")
    if any(m.omissions is None for m in full.measures):
        print("Omissions: not reported by this build")
    else:
        stages = sum((m.omissions or Counter() for m in full.measures), Counter[str]())
        print(
            "Omissions reported by the manifests: "
            + (", ".join(f"{s} {n}" for s, n in sorted(stages.items())) or "none")
        )


# --- running ------------------------------------------------------------------------------


async def evaluate(
    rt: Runtime,
    questions: Sequence[Question],
    manifests: Mapping[str, SourceManifest],
    texts: Mapping[str, str],
) -> tuple[dict[str, Totals | str], dict[str, float]]:
    service = read_service(rt)
    results: dict[str, Totals | str] = {}
    timings: dict[str, float] = {}
    for name, overrides in {FULL: {}, **ABLATIONS}.items():
        missing = missing_fields(overrides)
        if missing:
            results[name] = "not available in this build (" + ", ".join(missing) + ")"
            continue
        started = time.perf_counter()
        try:
            requests = [request_for(q, overrides) for q in questions]
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            results[name] = f"refused by the request model: {first['msg']}"
            continue
        totals = Totals()
        for q, request in zip(questions, requests, strict=True):
            totals.measures.append(await measure(service, q, request, manifests, texts))
        results[name] = totals
        timings[name] = time.perf_counter() - started
        print(f"  {name}: {len(questions)} packs in {timings[name]:.1f}s", flush=True)
    return results, timings


def corpus_texts(manifests: Mapping[str, SourceManifest]) -> dict[str, str]:
    """Every document's text by `source/doc_id`, to cut anchor spans from."""
    texts = {}
    for source, m in manifests.items():
        assert m.folder is not None
        root = Path(m.folder.path)
        for file in sorted(root.rglob("*.md")):
            texts[f"{source}/{file.relative_to(root).as_posix()}"] = file.read_text()
    return texts


async def index_corpus(rt: Runtime, manifests: Mapping[str, SourceManifest]) -> None:
    for m in manifests.values():
        await rt.registry.register(m)
    for source, m in manifests.items():
        assert m.folder is not None
        await sync_source(rt, source, Path(m.folder.path))
    await caught_up(rt, list(manifests))
    await rt.index.refresh()


async def caught_up(rt: Runtime, sources: Sequence[str], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    behind: dict[str, int] = {}
    while time.monotonic() < deadline:
        behind = {s: await rt.ingest_state.behind(s) for s in sources}
        if not any(behind.values()):
            return
        await asyncio.sleep(0.3)
    raise TimeoutError(f"the indexer did not catch up: documents behind per source {behind}")


async def main() -> int:
    configure_logging(level="WARNING")
    questions, investigations = load_questions(LABELS)
    manifests = load_manifests()
    problems = label_problems(questions, manifests)
    if problems:
        print("the labels do not fit the corpus:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    required = sum(len(q.required) for q in questions)
    texts = corpus_texts(manifests)
    print(
        f"{len(questions)} questions over {len(investigations)} investigations, {required} "
        f"required evidence items; budget {BUDGET['max_tokens']} tokens, "
        f"{BUDGET['max_items']} items, {BUDGET['max_per_document']} per document"
    )
    begun = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="govindex-eval-packs-") as tmp:
        root = Path(tmp)
        stack = EmbeddedStack(root / "state", namespace="evalpacks", durable=False)
        print("starting the embedded stack ...", flush=True)
        started = time.perf_counter()
        settings = Settings(state_dir=root / "state", namespace="evalpacks").model_copy(
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
                    await index_corpus(rt, manifests)
                    index_s = time.perf_counter() - started
                    print(
                        f"stack up in {stack_s:.1f}s; {len(texts)} documents from "
                        f"{len(manifests)} sources ingested and indexed in {index_s:.1f}s",
                        flush=True,
                    )
                    print("packing ...", flush=True)
                    results, timings = await evaluate(rt, questions, manifests, texts)
                finally:
                    await workers.stop()
        finally:
            stack.stop()
    full = results[FULL]
    assert isinstance(full, Totals)
    report_ablations(results)
    report_investigations(full, investigations)
    report_types(results)
    report_details(full)
    print(
        f"\ntiming: stack {stack_s:.1f}s, indexing {index_s:.1f}s, evaluation "
        f"{sum(timings.values()):.1f}s ({len(timings)} configurations), total "
        f"{time.perf_counter() - begun:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
