"""Formats: what turning PDF, Office, HTML and notebook files into canonical text costs,
next to markitdown on the same files, and how fast code is cut, all in one process.

Every corpus is built at run time in a temporary directory, seeded, so a run sees the
same bytes as the last one (the fingerprint printed with the corpus says so): policies as
PDF (reportlab), handbooks, decks and workbooks as Office files (python-docx, python-pptx,
openpyxl), wiki-export pages as HTML, notebooks as .ipynb JSON, and code. Python,
JavaScript and C are real source files taken from the virtualenv's site-packages; Go,
TypeScript, Rust, Java, SQL, shell and HCL are generated.

For each document format it prints MB/s of extraction alone (the extractor called in this
process), of extraction + chunking, chunks per MB and their kinds, what going through the
extraction sandbox (a child process) adds per file, markitdown's MB/s on the same files
with the ratio and the size of both outputs, and the share of the indexer's planning time
(extraction, then parse + stamp in `plan_version`) that extraction takes. For code it
prints the parser's MB/s, planning MB/s and chunks per MB. A format whose extractor, or a
language whose parser, is not registered yet is skipped with a note. It prints figures
and asserts nothing; it exits non-zero only when it cannot run.

    make bench-formats        # installs markitdown into .venv for the comparison only

`--scale 0.2` builds a fifth of the corpus for a quick look; `--only PDF,Go` picks formats.
The corpus builders are in formats_corpus.py (PDF, Office), formats_markup.py (HTML,
notebooks) and formats_code.py; this script builds the corpora it is asked for, measures
them and prints the report.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from formats_code import GENERATED, REAL, generated_code, real_code
from formats_corpus import docx_corpus, pdf_corpus, pptx_corpus, xlsx_corpus
from formats_markup import html_corpus, notebook_corpus
from govindex.core import formats as wire
from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex
from govindex.core.records import ChunkDraft, SourceManifest
from indexer import extractors
from indexer.extractors.base import DEFAULT_LIMITS, Extracted, Extractor
from indexer.parsers import PARSERS, Parser, parser_for
from indexer.planning import plan_version

SEED = 24
LIMITS = DEFAULT_LIMITS
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
MB = 1_000_000
REPEAT = 3  # best of, within TIME_BUDGET seconds per measure
TIME_BUDGET = 20.0


# --- measures ---------------------------------------------------------------------------


def best_seconds(fn: Callable[[], object], repeat: int = REPEAT) -> float:
    """The fastest of up to `repeat` runs, stopping early once TIME_BUDGET is spent (a
    slow contender is measured fewer times rather than holding the run for minutes)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if sum(times) > TIME_BUDGET:
            break
    return min(times)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@dataclass
class Corpus:
    label: str
    origin: str
    paths: list[Path]

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in self.paths)


@dataclass
class Measured:
    """One document format's figures; `None` where a contender could not be measured."""

    label: str
    files: int
    megabytes: float
    extractor: str
    extract_mbs: float
    chunked_mbs: float
    chunks: int
    kinds: Counter[str]
    chars: int
    pages: int  # pages the extractor located (PDF pages, slides, sheets), 0 when none
    extract_seconds: float
    plan_seconds: float
    sandbox_ms: float | None  # per file, over the direct call
    first_call_ms: float | None  # the sandbox's first file of this format (start, imports)
    markitdown_mbs: float | None = None
    markitdown_chars: int | None = None
    magika_share: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class CodeMeasured:
    label: str
    origin: str
    files: int
    megabytes: float
    parser: str
    parse_mbs: float
    plan_mbs: float
    chunks: int
    kinds: Counter[str]
    unparsed: int
    notes: list[str] = field(default_factory=list)


MANIFEST = SourceManifest.model_validate(
    {
        "source_id": "formats",
        "tenant": "bench",
        "source_type": "git",
        "owner_team": "platform",
        "classification": "internal",
        "default_acl": ["group:eng"],
        "allowed_purposes": ["support"],
        "trust_level": "authoritative",
    }
)


def event(path: Path, data: bytes, sequence: int) -> tuple[DocumentChanged, str]:
    """The change event a connector sends for the file, and its content as carried."""
    name = path.name
    content = wire.encode(data) if wire.is_binary(name) else data.decode("utf-8")
    payload = DocumentChanged(
        tenant_id=MANIFEST.tenant,
        source_id=MANIFEST.source_id,
        doc_id=name,
        source_version=f"v{sequence}",
        sequence=sequence,
        observed_at=NOW,
        content_hash=sha256_hex(content),
        content=content,
        media_type=wire.media_type(name),
        content_encoding=wire.BASE64 if wire.is_binary(name) else "utf-8",
        path=name,
    )
    return payload, content


def faithless(text: str, chunks: Sequence[ChunkDraft]) -> int:
    """Chunks whose text is not the canonical text at their span (there should be none)."""
    return sum(1 for c in chunks if text[c.span.char_start : c.span.char_end] != c.text)


class Markitdown:
    """markitdown as a user calls it (`convert_stream` with the file's extension), and
    magika's file-type guess alone, which markitdown runs on every file."""

    def __init__(self) -> None:
        from magika import Magika
        from markitdown import MarkItDown, StreamInfo

        self._md = MarkItDown(enable_plugins=False)
        self._info = StreamInfo
        self._magika = Magika()

    def convert(self, path: Path, data: bytes) -> str:
        info = self._info(extension=path.suffix, filename=path.name)
        return self._md.convert_stream(io.BytesIO(data), stream_info=info).markdown

    def guess(self, data: bytes) -> object:
        return self._magika.identify_bytes(data)


def load_markitdown() -> Markitdown | None:
    try:
        return Markitdown()
    except ImportError as exc:
        print(
            f"note: markitdown is not installed ({exc.name}); `make bench-formats` installs "
            "it for the comparison, or: pip install 'markitdown[pdf,docx,pptx,xlsx]'\n"
        )
        return None


def measure_document(corpus: Corpus, markitdown: Markitdown | None) -> Measured | None:
    first = corpus.paths[0]
    extractor: Extractor | None = extractors.extractor_for(first.name)
    if extractor is None:
        print(f"  {corpus.label}: skipped, no extractor registered for {first.suffix} yet")
        return None
    notes: list[str] = []
    files: list[tuple[Path, bytes]] = []
    for path in corpus.paths:
        data = path.read_bytes()
        try:
            extractor.extract(data, LIMITS)
        except Exception as exc:  # a refusal is a finding of the run, not its end
            notes.append(f"{path.name} refused: {exc.__class__.__name__}: {str(exc)[:160]}")
            continue
        files.append((path, data))
    if not files:
        print(f"  {corpus.label}: skipped, the extractor refused every file ({notes[0]})")
        return None
    size = sum(len(d) for _, d in files)
    datas = [d for _, d in files]

    def extract_all() -> list[Extracted]:
        return [extractor.extract(d, LIMITS) for d in datas]

    def extract_and_chunk() -> list[object]:
        return [PARSERS[x.parser].parse(x.text) for x in extract_all()]

    extract_seconds = best_seconds(extract_all)
    chunked_seconds = best_seconds(extract_and_chunk)
    found = extract_all()
    if [x.text for x in found] != [x.text for x in extract_all()]:
        notes.append("the same bytes gave different text on two extractions")
    kinds: Counter[str] = Counter()
    broken = 0
    for x in found:
        chunks = PARSERS[x.parser].parse(x.text).chunks
        kinds.update(c.kind.value for c in chunks)
        broken += faithless(x.text, chunks)
    if broken:
        notes.append(f"{broken} chunks are not the canonical text at their span")

    # The indexer's own path: extraction in the sandbox, then plan_version on its result.
    sandbox_ms = first_call_ms = None
    try:
        first_call_ms = timed(lambda: extractors.extract(files[0][0].name, files[0][1])) * 1000
        sandboxed: list[Extracted | None] = []
        extra = 0.0
        for path, data in files:  # interleaved, so a busy moment of the machine hits both
            direct = min(timed(partial(extractor.extract, data, LIMITS)) for _ in range(3))
            boxed = min(timed(partial(extractors.extract, path.name, data)) for _ in range(3))
            sandboxed.append(extractors.extract(path.name, data))
            extra += boxed - direct
        sandbox_ms = extra / len(files) * 1000
        if [x.text if x else None for x in sandboxed] != [x.text for x in found]:
            notes.append("the sandbox's text differs from the direct call's")
    except Exception as exc:  # the sandbox refusing a file the direct call read is a finding
        notes.append(f"through the sandbox: {exc.__class__.__name__}: {str(exc)[:160]}")
    stamped = [replace(x, extractor=f"{extractor.name}-{extractor.version}") for x in found]
    events = [event(p, d, k) for k, (p, d) in enumerate(files, 1)]
    plan_seconds = best_seconds(
        lambda: [
            plan_version(payload, content, MANIFEST, generation=1, now=NOW, extracted=x)
            for (payload, content), x in zip(events, stamped, strict=True)
        ]
    )
    measured = Measured(
        label=corpus.label,
        files=len(files),
        megabytes=size / MB,
        extractor=f"{extractor.name} {extractor.version}",
        extract_mbs=size / MB / extract_seconds,
        chunked_mbs=size / MB / chunked_seconds,
        chunks=sum(kinds.values()),
        kinds=kinds,
        chars=sum(len(x.text) for x in found),
        pages=sum(len(x.pages) for x in found),
        extract_seconds=extract_seconds,
        plan_seconds=plan_seconds,
        sandbox_ms=sandbox_ms,
        first_call_ms=first_call_ms,
        notes=notes,
    )
    if markitdown is not None:
        compare(measured, files, markitdown)
    return measured


def compare(measured: Measured, files: list[tuple[Path, bytes]], markitdown: Markitdown) -> None:
    outputs: list[str] = []

    def convert_all() -> None:
        outputs[:] = [markitdown.convert(p, d) for p, d in files]

    try:
        seconds = best_seconds(convert_all)  # slow on some formats: no separate warm-up pass
    except Exception as exc:  # its failure on a file is a figure of the run too
        measured.notes.append(f"markitdown failed: {exc.__class__.__name__}: {str(exc)[:160]}")
        return
    guessing = best_seconds(lambda: [markitdown.guess(d) for _, d in files])
    measured.markitdown_mbs = measured.megabytes / seconds
    measured.markitdown_chars = sum(len(o) for o in outputs)
    measured.magika_share = guessing / seconds


def measure_code(corpus: Corpus) -> CodeMeasured | None:
    if not corpus.paths:
        print(f"  {corpus.label}: skipped, no source files found ({corpus.origin})")
        return None
    parsers: dict[str, Parser] = {}
    for path in corpus.paths:
        parser = parser_for("auto", path.name)
        parsers[parser.name] = parser
    if set(parsers) == {"text"}:
        suffix = corpus.paths[0].suffix
        print(f"  {corpus.label}: skipped, no parser registered for {suffix} yet (text fallback)")
        return None
    texts = [(p, p.read_text(encoding="utf-8")) for p in corpus.paths]
    size = sum(len(t.encode()) for _, t in texts)
    chosen = [(parser_for("auto", p.name), t) for p, t in texts]
    parse_seconds = best_seconds(lambda: [parser.parse(t) for parser, t in chosen])
    events = [event(p, t.encode(), k) for k, (p, t) in enumerate(texts, 1)]
    plan_seconds = best_seconds(
        lambda: [
            plan_version(payload, content, MANIFEST, generation=1, now=NOW)
            for payload, content in events
        ]
    )
    kinds: Counter[str] = Counter()
    unparsed = broken = 0
    for parser, text in chosen:
        chunks = parser.parse(text).chunks
        kinds.update(c.kind.value for c in chunks)
        unparsed += sum(1 for c in chunks if "unparsed" in c.labels)
        broken += faithless(text, chunks)
    notes = []
    if broken:
        notes.append(f"{broken} chunks are not the file's text at their span")
    if "text" in parsers:
        notes.append("some files fell back to the text parser")
    return CodeMeasured(
        label=corpus.label,
        origin=corpus.origin,
        files=len(texts),
        megabytes=size / MB,
        parser=", ".join(f"{p.name} {p.version}" for p in parsers.values()),
        parse_mbs=size / MB / parse_seconds,
        plan_mbs=size / MB / plan_seconds,
        chunks=sum(kinds.values()),
        kinds=kinds,
        unparsed=unparsed,
        notes=notes,
    )


# --- the report -------------------------------------------------------------------------


def top_kinds(kinds: Counter[str], n: int = 3) -> str:
    total = sum(kinds.values()) or 1
    return ", ".join(f"{kind} {count / total:.0%}" for kind, count in kinds.most_common(n))


def optional(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def report(documents: list[Measured], code: list[CodeMeasured]) -> None:
    if documents:
        print("\ndocuments (MB = input file bytes; best of up to 3 runs):\n")
        print(
            f"  {'format':<9} {'files':>5} {'MB':>6} {'extract':>9} {'+chunk':>8} "
            f"{'chunks/MB':>9} {'markitdown':>10} {'ours/md':>8} {'chars':>10} {'md chars':>10}"
        )
        for m in documents:
            ratio = m.extract_mbs / m.markitdown_mbs if m.markitdown_mbs else None
            print(
                f"  {m.label:<9} {m.files:>5} {m.megabytes:>6.2f} {m.extract_mbs:>7.2f}/s "
                f"{m.chunked_mbs:>6.2f}/s {m.chunks / m.megabytes:>9.0f} "
                f"{optional(m.markitdown_mbs, '8.2f'):>8}/s {optional(ratio, '7.2f'):>7}x "
                f"{m.chars:>10,} {optional(m.markitdown_chars, ','):>10}"
            )
        print(
            "\n  chunk kinds, extractor, its pages per second where it locates pages, and the "
            "share of\n  markitdown's time spent detecting the file type (magika):\n"
        )
        for m in documents:
            magika = optional(None if m.magika_share is None else m.magika_share * 100, ".0f")
            pages = f"{m.pages / m.extract_seconds:,.0f} pages/s" if m.pages else ""
            print(
                f"  {m.label:<9} {top_kinds(m.kinds):<44} {m.extractor:<12} {pages:>14}  "
                f"magika {magika}%"
            )
        print("\n  the indexer's planning time per format (extraction, then parse + stamp):\n")
        print(
            f"  {'format':<9} {'extract s':>9} {'plan s':>8} {'extraction share':>16} "
            f"{'sandbox +ms/file':>16} {'first call ms':>13}"
        )
        for m in documents:
            share = m.extract_seconds / (m.extract_seconds + m.plan_seconds)
            print(
                f"  {m.label:<9} {m.extract_seconds:>9.3f} {m.plan_seconds:>8.3f} "
                f"{share:>15.0%} {optional(m.sandbox_ms, '.1f'):>16} "
                f"{optional(m.first_call_ms, '.0f'):>13}"
            )
        ratios = [m.extract_mbs / m.markitdown_mbs for m in documents if m.markitdown_mbs]
        if ratios:
            mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            print(
                f"\n  extraction, ours / markitdown: geometric mean {mean:.2f}x over {len(ratios)}"
            )
    if code:
        print("\ncode (MB = source bytes; plan = parse + stamp in plan_version):\n")
        print(
            f"  {'language':<11} {'files':>5} {'MB':>5} {'parse':>9} {'plan':>8} "
            f"{'chunks/MB':>9} {'unparsed':>8}  {'parser':<18} kinds"
        )
        for c in code:
            print(
                f"  {c.label:<11} {c.files:>5} {c.megabytes:>5.2f} {c.parse_mbs:>7.2f}/s "
                f"{c.plan_mbs:>6.2f}/s {c.chunks / c.megabytes:>9.0f} {c.unparsed:>8}  "
                f"{c.parser:<18} {top_kinds(c.kinds)}"
            )
    everything: list[Measured | CodeMeasured] = [*documents, *code]
    notes = [(m.label, n) for m in everything for n in m.notes]
    if notes:
        print("\nnotes:")
        for label, note in notes:
            print(f"  {label}: {note}")


DOCUMENTS: dict[str, tuple[str, Callable[[Path, random.Random, float], list[Path]]]] = {
    "PDF": ("generated with reportlab: policies, numbered clauses, tables", pdf_corpus),
    "DOCX": ("generated with python-docx: handbooks, steps, tables", docx_corpus),
    "PPTX": ("generated with python-pptx: review decks, tables, notes", pptx_corpus),
    "XLSX": ("generated with openpyxl: inventory, incidents, budget", xlsx_corpus),
    "HTML": ("generated: wiki-export pages with nav, sidebar, tables, code", html_corpus),
    "ipynb": ("generated: notebooks with outputs, tables, plots", notebook_corpus),
}


def build(root: Path, labels: set[str] | None, scale: float) -> tuple[list[Corpus], list[Corpus]]:
    def wanted(label: str) -> bool:
        return labels is None or label.lower() in labels

    documents, code = [], []
    for k, (label, (origin, make)) in enumerate(DOCUMENTS.items()):
        if not wanted(label):
            continue
        where = root / label.lower()
        where.mkdir()
        try:
            paths = make(where, random.Random(SEED + k), scale)
        except ImportError as exc:
            print(f"  {label}: skipped, cannot build its corpus without {exc.name}")
            continue
        documents.append(Corpus(label, origin, paths))
    for k, label in enumerate([*REAL, *GENERATED]):
        if not wanted(label):
            continue
        where = root / label.lower()
        where.mkdir()
        rng = random.Random(SEED + 100 + k)
        if label in REAL:
            packages = ", ".join(REAL[label][1]) or "any package"
            paths = real_code(where, label, rng, scale)
            code.append(Corpus(label, f"real, site-packages ({packages})", paths))
        else:
            code.append(Corpus(label, "generated", generated_code(where, label, rng, scale)))
    return documents, code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=1.0, help="corpus size factor")
    parser.add_argument("--only", help="comma-separated formats, e.g. PDF,HTML,Go")
    args = parser.parse_args(argv)
    labels = {x.strip().lower() for x in args.only.split(",")} if args.only else None
    with tempfile.TemporaryDirectory(prefix="govindex-formats-") as tmp:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"machine: {os.cpu_count()} cores, load average {load} (figures are of this run)\n")
        print("corpus (built in a temporary directory; seeded):\n")
        documents, code = build(Path(tmp), labels, args.scale)
        digest = hashlib.sha256()
        for corpus in [*documents, *code]:
            for path in corpus.paths:
                digest.update(path.name.encode() + b"\0" + path.read_bytes())
            print(
                f"  {corpus.label:<11} {len(corpus.paths):>4} files {corpus.size / MB:>6.2f} MB  "
                f"{corpus.origin}"
            )
        print(f"  fingerprint {digest.hexdigest()[:16]} (the same on every run of this venv)\n")
        extractors.extractor_for(None)  # registers what formats.ALL holds
        registered = sorted(extractors.EXTRACTORS) or ["none"]
        print(f"extractors registered: {', '.join(registered)}\n")
        markitdown = load_markitdown() if documents else None
        try:
            measured = [m for c in documents if (m := measure_document(c, markitdown))]
            cut = [k for c in code if (k := measure_code(c))]
        finally:
            extractors.SANDBOX.close()
    report(measured, cut)
    return 0


if __name__ == "__main__":
    sys.exit(main())
