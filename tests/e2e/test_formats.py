"""The formats teams have, through the real connectors and servers: a folder, a git
repository read by `govindex ingest git` and one pushed to by webhook, holding a PDF
policy, a Word guide, a slide deck, a spreadsheet, a wiki page, a notebook and Go code,
are indexed with the default include, governed like Markdown, located by page (and on
the page) where they have pages, faithful to their canonical text; a zip bomb and a
broken PDF are dead-lettered once with their reason and block nothing."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import docx
import openpyxl
import pptx
import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from govindex.core.deadletters import ERROR_HEADER, REASON_HEADER
from indexer.extractors.pdf import PDF
from indexer.reparse import reparse
from ingest.app import GitCheckout, WebhookServer, sync_source
from reader.app import read_service
from reader.models import SearchRequest, Subject
from tests.e2e.test_hostile_documents import letters_with
from tests.e2e.test_webhooks import deliver
from tests.support.pipeline import Pipeline, query, until
from tests.support.webhooks import Remote, github_push

pytestmark = pytest.mark.e2e

ZERO = "0" * 40
SECRET = "formats-hook-secret"


def policy_pdf() -> bytes:
    """Three pages: a title, section headings and numbered clauses, a running footer."""
    out = io.BytesIO()
    page = canvas.Canvas(out, pagesize=A4)
    clauses = [
        (
            "1. Scope",
            [
                "1.1 This policy covers production access for every engineer.",
                "1.2 Contractors follow clause 4 in addition.",
            ],
        ),
        (
            "2. Approval",
            [
                "2.1 Production access needs a second approver from the owning team.",
                "2.2 Emergency access expires after four hours.",
            ],
        ),
        (
            "3. Review",
            [
                "3.1 Access is reviewed quarterly by the security team.",
                "3.2 Unused grants are revoked after thirty days.",
            ],
        ),
    ]
    for number, (heading, lines) in enumerate(clauses, start=1):
        y = 780
        if number == 1:
            page.setFont("Helvetica-Bold", 20)
            page.drawString(72, y, "Production Access Policy")
            y -= 40
        page.setFont("Helvetica-Bold", 14)
        page.drawString(72, y, heading)
        y -= 26
        page.setFont("Helvetica", 11)
        for line in lines:
            page.drawString(72, y, line)
            y -= 18
        page.setFont("Helvetica", 8)
        page.drawString(72, 40, f"Acme Policy - Page {number}")
        page.showPage()
    page.save()
    return out.getvalue()


def guide_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Failover guide", level=1)
    document.add_paragraph("Use this guide when the primary database is down.")
    document.add_heading("Steps", level=2)
    document.add_paragraph("Promote the replica with dbctl promote.", style="List Number")
    document.add_paragraph("Repoint the service to the new primary.", style="List Number")
    table = document.add_table(rows=2, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Service", "Owner"
    table.rows[1].cells[0].text, table.rows[1].cells[1].text = "orders-db", "team-data"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def deck_pptx() -> bytes:
    deck = pptx.Presentation()
    for n, (title, body) in enumerate(
        [("Quarterly review", "Latency targets met"), ("Next quarter", "Migrate the ledger")]
    ):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        slide.notes_slide.notes_text_frame.text = f"speaker notes {n + 1}"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def sheet_xlsx() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Oncall"
    sheet.append(["week", "primary", "secondary"])
    sheet.append(["2025-W10", "ana", "bo"])
    sheet.append(["2025-W11", "chen", "dee"])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


WIKI = """<!doctype html><html><head><title>Cache flush</title><style>p{}</style>
<script>track()</script></head><body><nav><a href="/">Home</a> | <a href="/x">Menu</a></nav>
<main><h1>Cache flush</h1><p>Flush the edge cache after a bad deploy.</p>
<ol><li>Run cachectl flush --all.</li><li>Watch the hit ratio recover.</li></ol>
<table><tr><th>Region</th><th>Command</th></tr><tr><td>eu</td><td>cachectl flush eu</td></tr>
</table></main><footer>Copyright wiki</footer></body></html>
"""
NOTEBOOK = json.dumps(
    {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "cells": [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": ["# Error budget\n", "How much is left."],
            },
            {
                "cell_type": "code",
                "metadata": {},
                "execution_count": 1,
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": ["OUTPUT-NOT-INDEXED\n"]}
                ],
                "source": ["def budget_left(slo):\n", "    return 1 - slo\n"],
            },
        ],
    }
)
GO = """package billing

// Charge bills a customer once.
func Charge(customer string, cents int) error {
\treturn nil
}

type Ledger struct{ entries []string }

func (l *Ledger) Append(entry string) { l.entries = append(l.entries, entry) }
"""


def corpus() -> dict[str, bytes]:
    return {
        "policies/access.pdf": policy_pdf(),
        "runbooks/failover.docx": guide_docx(),
        "reviews/q1.pptx": deck_pptx(),
        "oncall/rota.xlsx": sheet_xlsx(),
        "wiki/cache-flush.html": WIKI.encode(),
        "notebooks/budget.ipynb": NOTEBOOK.encode(),
        "code/billing.go": GO.encode(),
    }


async def _versions(p: Pipeline, source: str) -> dict[str, dict[str, Any]]:
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT v.doc_id, v.content, v.raw_content, v.parser, v.parser_version "
            "FROM documents d JOIN document_versions v ON v.version_id = d.current_version_id "
            "WHERE d.source_id = %s AND d.state = 'active'",
            (source,),
        )
        return {
            row[0]: {"content": row[1], "raw": row[2], "parser": row[3], "version": row[4]}
            for row in await cur.fetchall()
        }


async def _assert_indexed_faithfully(p: Pipeline, source: str) -> dict[str, list[dict[str, Any]]]:
    versions = await _versions(p, source)
    assert set(versions) == set(corpus())
    chunks: dict[str, list[dict[str, Any]]] = {}
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT doc_id, text, char_start, char_end, locator, labels, kind, context FROM chunks "
            "WHERE source_id = %s AND superseded_at IS NULL",
            (source,),
        )
        names = [d.name for d in cur.description or []]
        rows = [dict(zip(names, row, strict=True)) for row in await cur.fetchall()]
    for row in rows:
        content = versions[row["doc_id"]]["content"]
        assert content[row["char_start"] : row["char_end"]] == row["text"]  # faithful
        chunks.setdefault(row["doc_id"], []).append(row)
    assert set(chunks) == set(corpus())
    for doc_id in ("policies/access.pdf", "runbooks/failover.docx", "wiki/cache-flush.html"):
        assert versions[doc_id]["raw"] is not None  # kept for re-extraction
    assert "+pdf-" in versions["policies/access.pdf"]["version"]
    return chunks


@pytest.fixture
async def folder_source(pipeline: Pipeline) -> tuple[Pipeline, str]:
    source = f"files-{pipeline.tenant}"
    await pipeline.register(source_id=source, source_type="folder")  # the default include
    return pipeline, source


async def test_every_format_in_a_folder_is_indexed_governed_and_located(
    folder_source: tuple[Pipeline, str], tmp_path: Path
) -> None:
    p, source = folder_source
    folder = tmp_path / "share"
    for name, data in corpus().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    report, _ = await sync_source(p.rt, source, folder)
    assert sorted(report.created) == sorted(corpus()) and report.skipped == []
    await p.wait_caught_up(source)
    chunks = await _assert_indexed_faithfully(p, source)

    pdf = chunks["policies/access.pdf"]
    approval = next(c for c in pdf if "second approver" in c["text"])
    assert approval["locator"] == "policies/access.pdf#page=2"
    assert "page:2" in approval["labels"]
    # Where on the page: its first line was drawn at x=72 on the baseline 754 points up
    # an A4 page, in 11-point type (8.8 points of it above the baseline).
    (bbox,) = [label for label in approval["labels"] if label.startswith("bbox:")]
    left, top, right, bottom = (float(v) for v in bbox.removeprefix("bbox:").split(","))
    assert left == pytest.approx(72, abs=0.5) and right > 300
    assert top == pytest.approx(A4[1] - 754 - 8.8, abs=1) and bottom > A4[1] - 754
    assert all("Acme Policy - Page" not in c["text"] for c in pdf)  # the running footer
    assert {c["kind"] for c in pdf} & {"clause", "step"}
    deck = chunks["reviews/q1.pptx"]
    ledger = next(c for c in deck if "ledger" in c["text"])
    assert ledger["locator"] == "reviews/q1.pptx#page=2"
    assert ledger["context"] == "Notes: speaker notes 2"  # the slide's notes as its context
    assert any(c["text"].strip() == "> Notes: speaker notes 2" for c in deck)  # and found
    rota = [c for c in chunks["oncall/rota.xlsx"] if c["kind"] == "row_group"]
    assert [(c["text"], c["labels"][:2]) for c in rota] == [
        (
            "week,primary,secondary\n2025-W10,ana,bo\n2025-W11,chen,dee",
            ["key:2025-W10", "key:2025-W11"],
        )
    ]
    notebook = chunks["notebooks/budget.ipynb"]
    assert all("OUTPUT-NOT-INDEXED" not in c["text"] for c in notebook)
    assert any("function:budget_left" in c["labels"] for c in notebook)  # its code parser
    html = chunks["wiki/cache-flush.html"]
    assert all("<" not in c["text"] and "Menu" not in c["text"] for c in html)
    assert any("function:Charge" in c["labels"] for c in chunks["code/billing.go"])

    # Found by the read service with the page in the anchor, and only by who may see it.
    await p.rt.index.refresh()
    found = await read_service(p.rt).search(
        SearchRequest(
            tenant=p.tenant,
            subject=Subject(principals=["group:eng"]),
            purpose="support",
            query="second approver production access",
            cache="bypass",
        )
    )
    (hit,) = [h for h in found.hits if "second approver" in h.text]
    assert hit.kind == "clause" and hit.anchor.locator == "policies/access.pdf#page=2"
    assert await query(p, "second approver", principals=("group:nobody",)) == []


def zip_bomb() -> bytes:
    """A DOCX-shaped archive whose one member inflates to 300 MB of zeros."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w") as member:
            block = b"\0" * (1 << 20)
            for _ in range(300):
                member.write(block)
    return out.getvalue()


async def test_a_zip_bomb_and_a_broken_pdf_are_dead_lettered_once_with_their_reason(
    folder_source: tuple[Pipeline, str], tmp_path: Path
) -> None:
    p, source = folder_source
    folder = tmp_path / "share"
    folder.mkdir()
    (folder / "bomb.docx").write_bytes(zip_bomb())
    (folder / "broken.pdf").write_bytes(policy_pdf()[:700])
    (folder / "fine.html").write_bytes(WIKI.encode())
    await sync_source(p.rt, source, folder)
    (bomb,) = await letters_with(p, b"too_large", 1)
    assert b"decompresses" in dict(bomb.headers)[ERROR_HEADER]  # names the figure
    (broken,) = await letters_with(p, b"unreadable", 1)
    assert dict(broken.headers)[ERROR_HEADER]
    reasons = [dict(r.headers).get(REASON_HEADER) for r in p.dead_letters()]
    assert reasons.count(b"too_large") == 1 and reasons.count(b"unreadable") == 1
    await until(  # nothing else blocked, nothing of the refused files stored
        lambda: _versions(p, source), lambda v: set(v) == {"fine.html"}, 60, "fine.html"
    )


async def test_every_format_in_a_git_repository_is_indexed_from_its_blobs(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """What `govindex ingest git` runs: the files are read from the commit's blobs, not
    a checkout, and each binary travels as its bytes."""
    p = pipeline
    source = f"git-{p.tenant}"
    await p.register(source_id=source)  # the default include
    remote = Remote(tmp_path / "repo")
    head = remote.commit("2025-03-01T00:00:00Z", dict(corpus()))
    report, version = await sync_source(p.rt, source, GitCheckout(remote.path, "HEAD"))
    assert version == f"git:{head}"
    assert sorted(report.created) == sorted(corpus()) and report.skipped == []
    await p.wait_caught_up(source)
    chunks = await _assert_indexed_faithfully(p, source)
    approval = next(c for c in chunks["policies/access.pdf"] if "second approver" in c["text"])
    assert approval["locator"] == "policies/access.pdf#page=2"
    assert any(c["kind"] == "row_group" for c in chunks["oncall/rota.xlsx"])
    assert any("function:Charge" in c["labels"] for c in chunks["code/billing.go"])
    steps = [c for c in chunks["runbooks/failover.docx"] if c["kind"] == "step"]
    assert steps, "the Word guide's numbered steps"


async def test_every_format_pushed_to_git_is_indexed_by_the_webhook_and_a_pdf_purged(
    pipeline: Pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = pipeline
    monkeypatch.setenv("GOVINDEX_TEST_FORMATS_SECRET", SECRET)
    remote = Remote(tmp_path / "remote")
    source, repo = f"gh-{p.tenant}", f"acme/{p.tenant}"
    await p.register(
        source_id=source,
        git={
            "repository": repo,
            "remote_url": str(remote.path),
            "branch": "main",
            "webhook_secret_env": "GOVINDEX_TEST_FORMATS_SECRET",
        },
    )
    server = WebhookServer(p.rt)
    url = await server.start()
    try:
        head = remote.commit("2025-01-01T00:00:00Z", dict(corpus()))
        status, body = await deliver(url, "github", github_push(repo, ZERO, head), secret=SECRET)
        assert status == 200 and body["sources"][source]["created"] == len(corpus())
        await p.wait_caught_up(source)
        chunks = await _assert_indexed_faithfully(p, source)  # every format, by the webhook
        assert any("second approver" in c["text"] for c in chunks["policies/access.pdf"])
        assert any(c["kind"] == "row_group" for c in chunks["oncall/rota.xlsx"])

        gone = remote.commit("2025-02-01T00:00:00Z", {"policies/access.pdf": None})
        assert (await deliver(url, "github", github_push(repo, head, gone), secret=SECRET))[
            0
        ] == 200
        await p.wait_caught_up(source)

        async def left() -> int:
            async with p.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT count(*) FROM document_versions WHERE source_id = %s AND doc_id = "
                    "'policies/access.pdf' AND (content IS NOT NULL OR raw_content IS NOT NULL)",
                    (source,),
                )
                found = await cur.fetchone()
                return int(found[0]) if found else -1

        await until(left, lambda n: n == 0, 60, "the deleted PDF's text and bytes purged")
    finally:
        await server.stop()


async def test_a_new_extractor_version_re_extracts_from_the_kept_bytes(
    folder_source: tuple[Pipeline, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, source = folder_source
    folder = tmp_path / "share"
    (folder / "policies").mkdir(parents=True)
    (folder / "policies" / "access.pdf").write_bytes(policy_pdf())
    (folder / "wiki.html").write_bytes(WIKI.encode())
    await sync_source(p.rt, source, folder)
    await p.wait_caught_up(source)
    before = await _versions(p, source)
    (folder / "policies" / "access.pdf").unlink()  # the source no longer has the bytes

    kept = PDF.version
    monkeypatch.setattr(PDF, "version", kept + ".1")  # travels to the sandbox with the instance
    report = await reparse(
        versions=p.rt.versions,
        chunks=p.rt.chunks,
        registry=p.rt.registry,
        index=p.rt.index,
        source_id=source,
        generation=1,
    )
    assert report.reparsed == [f"{p.tenant}/{source}/policies/access.pdf"]
    assert report.unchanged == 1 and not report.failed  # the HTML page's extractor is as it was
    after = await _versions(p, source)
    assert after["policies/access.pdf"]["version"].endswith(f"+pdf-{kept}.1")
    assert before["policies/access.pdf"]["version"].endswith(f"+pdf-{kept}")
    assert after["policies/access.pdf"]["content"] == before["policies/access.pdf"]["content"]
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT DISTINCT parser_version FROM chunks WHERE source_id = %s AND doc_id = "
            "'policies/access.pdf' AND superseded_at IS NULL",
            (source,),
        )
        assert [r[0] for r in await cur.fetchall()] == [after["policies/access.pdf"]["version"]]
    hits = await query(p, "second approver production access")
    assert any("second approver" in h for h in hits)  # the index holds the new chunks
