"""`govindex documents`, `status`, `chunk`: look at what the index holds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from govindex.cli.common import (
    DEFAULT_DIR,
    Failure,
    JsonLines,
    LogLevel,
    SourceId,
    StateDir,
    argument,
    console,
    print_table,
    setup,
    short_version,
    when,
    with_runtime,
)

if TYPE_CHECKING:  # imported where they run: `govindex --help` loads no parser or driver
    from govindex.core.ports import DocumentRow
    from govindex.core.records import ChunkDraft
    from govindex.core.tokens import TokenEstimator
    from govindex.runtime.composition import Runtime
    from indexer.parsers import ParsedDocument, Parser
    from indexer.planning import PageLocator


def documents_command(
    source: SourceId,
    json_lines: JsonLines = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """List the documents the index holds for a source.

    Each document's id, state (active / deleted), current source_version and sequence,
    chunk count, valid time and last indexed time.

        govindex documents --source handbook
        govindex documents --source handbook --json
    """
    from ingest.app import registered

    settings = setup(state_dir, log_level)

    async def rows(rt: Runtime) -> list[DocumentRow]:
        await registered(rt, source, enabled=False)
        return await rt.chunks.documents(source)

    found = with_runtime(settings, rows)
    if json_lines:
        for row in found:
            console.print(json.dumps(row.__dict__, default=str), soft_wrap=True)
        return 0
    if not found:
        console.print(f"source {source} holds no documents yet")
        return 0
    print_table(
        (
            "DOC",
            "STATE",
            "SOURCE_VERSION",
            "SEQ",
            "CHUNKS",
            "VALID_FROM",
            "VALID_TO",
            "LAST_INDEXED",
        ),
        (
            (
                r.doc_id,
                r.state,
                short_version(r.source_version),
                str(r.last_sequence),
                str(r.chunk_count),
                when(r.valid_from),
                when(r.valid_to) or "-",
                when(r.last_indexed_at),
            )
            for r in found
        ),
    )
    return 0


def status_command(
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Show servers, topics with consumer lag, dead letters, the outbox and pending purges.

    Every server's address and whether it answers, each topic's consumer lag, dead letters
    by reason, the outbox's backlog and the purges still pending.

        govindex status
        govindex status --json
    """
    from govindex.control.status import collect_status, render_status

    settings = setup(state_dir, log_level)
    report = asyncio.run(collect_status(settings))
    if json_out:
        console.print(json.dumps(report, default=str, indent=2), soft_wrap=True)
    else:
        console.print(render_status(report), soft_wrap=True)
    return 0


def chunk_command(
    file: Annotated[Path, argument("FILE", "The file to cut.", kind=Path)],
    parser: Annotated[
        str,
        typer.Option(
            "--parser",
            metavar="NAME",
            help="A parser (markdown, csv, python, go, yaml, json, hcl, text, ...) or auto: by "
            "file type, extracting PDF, Word, PowerPoint, Excel, HTML and notebooks first.",
        ),
    ] = "auto",
    json_lines: Annotated[
        bool, typer.Option("--json", help="Full chunk records as JSON lines.")
    ] = False,
) -> int:
    """Show how a file would be cut into chunks (no servers needed).

    Parses FILE locally and prints each chunk's kind, locator, span, heading path, labels,
    token estimate and first line, or the full records as JSON lines. The parser comes
    from --parser or, by default, from the file type; a PDF, Word, PowerPoint, Excel,
    HTML or notebook file is first extracted to canonical text, as the indexer does (with
    its limits: a file it would refuse is refused here with the same reason), and located
    by page where it has pages. Tokens are counted as the indexer counts them
    (GOVINDEX_TOKENIZER).

        govindex chunk runbooks/db-failover.md
        govindex chunk policies/access.pdf
        govindex chunk infra/main.tf --json
    """
    from govindex.core.errors import InvalidEvent, ParserFailed, PermanentError
    from indexer.extractors import SANDBOX, extract, extractor_for
    from indexer.extractors.regions import cut
    from indexer.parsers import PARSERS, parser_for
    from indexer.planning import PageLocator

    try:
        data = file.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        raise Failure(f"{file}: no such file") from None
    tokens = _configured_tokens()
    extracted = None
    if parser == "auto" and extractor_for(file.name) is not None:
        try:
            extracted = extract(file.name, data)
        except PermanentError as exc:  # what the indexer would dead-letter it with
            raise Failure(f"{file} is refused ({exc.reason}): {exc}") from None
        finally:
            SANDBOX.close()
        assert extracted is not None
        text, chosen = extracted.text, PARSERS[extracted.parser]
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Failure(f"{file} is not UTF-8 text ({exc.reason}); govindex skips it") from None
        chosen = parser_for(parser, file.name)
    try:
        parsed = cut(extracted) if extracted else chosen.parse(text)
    except (InvalidEvent, ParserFailed) as exc:
        raise Failure(f"{file}: {exc}") from None
    where = file.as_posix()
    pages = PageLocator(extracted.pages, extracted.boxes) if extracted and extracted.pages else None
    if json_lines:
        _print_chunk_records(where, chosen, parsed, tokens, pages)
    else:
        if extracted is not None:
            console.print(
                f"{where}: extracted by {extracted.extractor} to {len(text):,} characters of "
                f"canonical text"
                + (
                    f" on {len(pages.pages)} page{'s' if len(pages.pages) != 1 else ''}"
                    if pages
                    else ""
                )
            )
        _print_chunk_table(where, chosen, parsed, tokens, pages)
    return 0


def _configured_tokens() -> TokenEstimator:
    """The estimator the indexer stamps with, from the environment (no servers needed)."""
    from pydantic import ValidationError

    from govindex.core.logs import configure_logging
    from govindex.core.settings import Settings
    from govindex.core.tokens import SETTING as TOKENIZER_SETTING
    from govindex.core.tokens import TokenizerError, estimator_from

    configure_logging(level="WARNING")  # logs to stderr: stdout is the chunks (--json)
    try:
        spec = Settings().tokenizer
    except ValidationError as exc:
        raise Failure(str(exc)) from None
    try:
        return estimator_from(spec)
    except TokenizerError as exc:
        raise Failure(f"{TOKENIZER_SETTING}={spec!r} is refused: {exc}") from None


def _print_chunk_records(
    where: str,
    chosen: Parser,
    parsed: ParsedDocument,
    tokens: TokenEstimator,
    pages: PageLocator | None,
) -> None:
    from govindex.core.hashing import sha256_hex
    from indexer.stamping import simhash64, token_estimate

    for c in parsed.chunks:
        record = c.as_json()
        record.update(
            labels=_labels(c, pages),
            parser=chosen.name,
            parser_version=chosen.version,
            locator=_locator(where, c, pages),
            content_hash=sha256_hex(c.text),
            token_estimate=token_estimate(c.text, tokens),
            simhash=simhash64(c.text),
        )
        console.print(json.dumps(record, ensure_ascii=False), soft_wrap=True)


def _print_chunk_table(
    where: str,
    chosen: Parser,
    parsed: ParsedDocument,
    tokens: TokenEstimator,
    pages: PageLocator | None,
) -> None:
    from indexer.stamping import token_estimate

    console.print(
        f"{where}: {len(parsed.chunks)} chunks by {chosen.name}@{chosen.version}"
        + (f", frontmatter {sorted(parsed.frontmatter)}" if parsed.frontmatter else "")
        + f", tokens by {tokens.label}"
    )
    print_table(
        ("#", "KIND", "LOCATOR", "LINES", "CHARS", "TOKENS", "PARENT", "LABELS", "FIRST LINE"),
        (
            (
                str(c.ordinal),
                c.kind.value,
                "#" + _locator(where, c, pages).split("#", 1)[1],
                f"{c.span.line_start}-{c.span.line_end}",
                f"{c.span.char_start}-{c.span.char_end}",
                str(token_estimate(c.text, tokens)),
                "-" if c.parent_ordinal is None else str(c.parent_ordinal),
                ",".join(_labels(c, pages))[:40] or "-",
                _first_line(c.text)[:50],
            )
            for c in parsed.chunks
        ),
    )


def _locator(where: str, draft: ChunkDraft, pages: PageLocator | None) -> str:
    """Where the indexer would locate the chunk: by page in a paged file, else by anchor
    or lines of the (canonical) text."""
    if pages is not None:
        return f"{where}#page={pages.page(draft.span.char_start)}"
    if draft.anchor:
        return f"{where}#{draft.anchor}"
    return f"{where}#L{draft.span.line_start}-L{draft.span.line_end}"


def _labels(draft: ChunkDraft, pages: PageLocator | None) -> list[str]:
    """The chunk's labels as the indexer stamps them (a paged file's `page:` and `bbox:`)."""
    located = pages.labels(draft.span.char_start, draft.span.char_end) if pages else []
    return [*draft.labels, *located]


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
