"""The document corpora of the formats benchmark (bench/formats.py) that libraries write:
policies as PDF (reportlab), handbooks, decks and workbooks as Office files (python-docx,
python-pptx, openpyxl), and the vocabulary every generated corpus draws from.

A benchmark that reads PDF and Office files needs files that look like the ones an
organisation holds, in the same bytes on every run: each builder takes a seeded
`random.Random`, and the Office files are rewritten with fixed timestamps because the
libraries stamp the current time. The HTML and notebook corpora are in formats_markup.py,
the code corpora in formats_code.py.
"""

from __future__ import annotations

import io
import random
import re
import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

FIXED = datetime(2024, 1, 2, 3, 4, 5)  # every generated file's creation and modification time

# --- words the generators draw from -----------------------------------------------------

SUBJECTS = [
    *["The service owner", "Each operator", "The on-call engineer", "The security office"],
    *["A data steward", "The change manager", "Every team", "The platform group"],
    *["The incident commander", "The system administrator", "A reviewer", "The vendor"],
]
MODALS = ["shall", "must", "should", "may", "shall not", "must not"]
ACTIONS = [
    *["review", "approve", "record", "rotate", "encrypt", "retain", "revoke", "audit"],
    *["escalate", "document", "verify", "restore", "classify", "report", "disable"],
]
OBJECTS = [
    *["access credentials", "the change record", "customer data", "backup snapshots"],
    *["the incident timeline", "service accounts", "encryption keys", "audit logs"],
    *["production deployments", "third-party integrations", "the risk register"],
    *["privileged sessions", "firewall rules", "personal data exports", "API tokens"],
]
QUALIFIERS = [
    *["within 24 hours", "before the change window opens", "at least quarterly"],
    *["after every incident", "in the approved tool", "with a second reviewer"],
    *["according to the retention schedule", "unless an exception is granted"],
    *["for every environment", "as soon as practicable", "on the first business day"],
]
SECONDS = [
    "the record names who approved it",
    "evidence is attached to the ticket",
    "the owner is told of the outcome",
    "the exception register is updated",
    "a copy is kept outside the primary region",
]
FILLERS = [
    "Exceptions require written approval from the policy owner.",
    "Evidence of compliance is kept for three years.",
    "This requirement applies to contractors as well as employees.",
    "Where a local regulation is stricter, the local regulation prevails.",
    "Questions about this section go to the security office.",
]
TOPICS = [
    *["Purpose", "Scope", "Definitions", "Roles and responsibilities", "Access control"],
    *["Data classification", "Encryption", "Logging and monitoring", "Incident response"],
    *["Business continuity", "Change management", "Vendor management", "Exceptions"],
    *["Enforcement", "Review and approval", "Retention", "Physical security", "Training"],
]
SUBTOPICS = [
    *["General requirements", "Privileged access", "Remote access", "Key management"],
    *["Reporting", "Escalation", "Evidence", "Periodic review", "Emergency changes"],
    *["Backups", "Third parties", "Removable media", "Service accounts", "Approvals"],
]
POLICIES = [
    *["Information Security", "Access Management", "Data Retention", "Incident Response"],
    *["Change Management", "Backup and Recovery", "Vendor Risk", "Acceptable Use"],
]
TEAMS = ["platform", "payments", "identity", "data", "search", "edge", "billing", "security"]
SERVICES = [
    *["checkout", "ledger", "gateway", "scheduler", "search-api", "auth", "notifier"],
    *["inventory", "reporting", "billing-worker", "session-store", "feature-flags"],
]
REGIONS = ["eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1"]
PEOPLE = ["A. Novak", "B. Okafor", "C. Lindqvist", "D. Haddad", "E. Moreau", "F. Tanaka"]
COMMANDS = [
    "kubectl -n {ns} rollout restart deployment/{svc}",
    "kubectl -n {ns} get pods -l app={svc} -o wide",
    "psql \"$DATABASE_URL\" -c 'select pg_is_in_recovery();'",
    "curl -fsS https://{svc}.internal/healthz | jq .status",
    "journalctl -u {svc} --since '-15 min' | grep -E 'ERROR|WARN'",
    "aws s3 sync s3://{svc}-backups/latest /restore/{svc} --only-show-errors",
    "vault kv get -field=password secret/{ns}/{svc}",
    "terraform -chdir=envs/{ns} plan -target=module.{svc}",
]


class Prose:
    """Policy-like sentences: who must do what, when; enough variety that no two
    paragraphs repeat."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def sentence(self) -> str:
        r = self.rng
        text = (
            f"{r.choice(SUBJECTS)} {r.choice(MODALS)} {r.choice(ACTIONS)} "
            f"{r.choice(OBJECTS)} {r.choice(QUALIFIERS)}"
        )
        if r.random() < 0.3:
            text += f", and {r.choice(SECONDS)}"
        return text + "."

    def paragraph(self, low: int = 2, high: int = 6) -> str:
        parts = [self.sentence() for _ in range(self.rng.randint(low, high))]
        if self.rng.random() < 0.3:
            parts.append(self.rng.choice(FILLERS))
        return " ".join(parts)

    def command(self) -> str:
        return self.rng.choice(COMMANDS).format(
            ns=self.rng.choice(["prod", "staging", "ops"]), svc=self.rng.choice(SERVICES)
        )


def fixed_zip(data: bytes) -> bytes:
    """An Office file rewritten with fixed member times and core-property dates, so the
    same seed gives the same bytes (the libraries stamp the current time)."""
    stamp = re.compile(rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*(</dcterms:)")
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for info in source.infolist():
            body = source.read(info)
            if info.filename == "docProps/core.xml":
                body = stamp.sub(rb"\g<1>2024-01-02T03:04:05Z\g<2>", body)
            member = zipfile.ZipInfo(info.filename, date_time=(2024, 1, 2, 3, 4, 5))
            member.compress_type = zipfile.ZIP_DEFLATED
            target.writestr(member, body)
    return out.getvalue()


def scaled(count: int, scale: float) -> int:
    return max(1, round(count * scale))


# --- PDF and Office corpora -------------------------------------------------------------


def pdf_corpus(root: Path, rng: random.Random, scale: float) -> list[Path]:
    """Policies: title, numbered sections and clauses (`4.1.2`, `(a)`), role tables,
    bullet lists, and a footer with the page number on every page."""
    from reportlab import rl_config  # type: ignore[import-untyped,unused-ignore]
    from reportlab.lib import colors  # type: ignore[import-untyped,unused-ignore]
    from reportlab.lib.pagesizes import A4  # type: ignore[import-untyped,unused-ignore]
    from reportlab.lib.styles import (  # type: ignore[import-untyped,unused-ignore]
        ParagraphStyle,
        getSampleStyleSheet,
    )
    from reportlab.lib.units import cm  # type: ignore[import-untyped,unused-ignore]
    from reportlab.pdfbase import pdfmetrics  # type: ignore[import-untyped,unused-ignore]
    from reportlab.pdfbase.ttfonts import TTFont  # type: ignore[import-untyped,unused-ignore]
    from reportlab.platypus import (  # type: ignore[import-untyped,unused-ignore]
        ListFlowable,
        ListItem,
        Paragraph,
        SimpleDocTemplate,
        Table,
        TableStyle,
    )

    rl_config.invariant = 1  # no creation time or random document id in the file
    # Embedded TrueType subsets, as an office suite writes them (Bitstream Vera ships with
    # reportlab): a PDF of the 14 standard fonts only would be unrealistically small.
    fonts = Path(rl_config.__file__).parent / "fonts"
    for name, file in [
        ("Vera", "Vera.ttf"),
        ("Vera-Bold", "VeraBd.ttf"),
        ("Vera-It", "VeraIt.ttf"),
    ]:
        pdfmetrics.registerFont(TTFont(name, str(fonts / file)))
    styles = getSampleStyleSheet()
    body = ParagraphStyle("body", parent=styles["BodyText"], fontName="Vera")
    indented = ParagraphStyle("subclause", parent=body, leftIndent=1.2 * cm)
    title_style = ParagraphStyle("title", parent=styles["Title"], fontName="Vera-Bold")
    meta_style = ParagraphStyle("meta", parent=styles["Italic"], fontName="Vera-It")
    h1 = ParagraphStyle("h1", parent=styles["Heading1"], fontName="Vera-Bold")
    h2 = ParagraphStyle("h2", parent=styles["Heading2"], fontName="Vera-Bold")
    paths = []
    for n in range(1, scaled(8, scale) + 1):
        prose = Prose(rng)
        title = f"{rng.choice(POLICIES)} Policy"
        story: list[Any] = [
            Paragraph(title, title_style),
            Paragraph(
                f"Document ISP-{n:03d} · version {rng.randint(1, 5)}.{rng.randint(0, 9)} · "
                f"owner: {rng.choice(TEAMS)} team",
                meta_style,
            ),
        ]
        for s in range(1, 25):
            story.append(Paragraph(f"{s} {rng.choice(TOPICS)}", h1))
            story.append(Paragraph(escape(prose.paragraph()), body))
            for ss in range(1, rng.randint(2, 4) + 1):
                story.append(Paragraph(f"{s}.{ss} {rng.choice(SUBTOPICS)}", h2))
                for c in range(1, rng.randint(3, 7) + 1):
                    story.append(Paragraph(f"{s}.{ss}.{c} {escape(prose.paragraph(1, 3))}", body))
                    if rng.random() < 0.25:
                        for letter in "abcd"[: rng.randint(2, 4)]:
                            story.append(Paragraph(f"({letter}) {prose.sentence()}", indented))
                if rng.random() < 0.3:
                    rows = [["Role", "Responsibility", "Review"]] + [
                        [
                            rng.choice(SUBJECTS).removeprefix("The "),
                            f"{rng.choice(ACTIONS)} {rng.choice(OBJECTS)}",
                            rng.choice(["monthly", "quarterly", "yearly", "per change"]),
                        ]
                        for _ in range(rng.randint(3, 6))
                    ]
                    table = Table(rows, colWidths=[5 * cm, 8 * cm, 3 * cm])
                    table.setStyle(
                        TableStyle(
                            [
                                ("GRID", (0, 0), (-1, -1), 0.5, colors.grey),
                                ("FONTNAME", (0, 0), (-1, -1), "Vera"),
                                ("FONTNAME", (0, 0), (-1, 0), "Vera-Bold"),
                            ]
                        )
                    )
                    story.append(table)
                if rng.random() < 0.2:
                    items = [ListItem(Paragraph(prose.sentence(), body)) for _ in range(4)]
                    story.append(ListFlowable(items, bulletType="bullet"))

        def footer(canvas: Any, doc: Any, n: int = n) -> None:
            canvas.saveState()
            canvas.setFont("Vera", 8)
            canvas.drawString(2 * cm, 1.2 * cm, f"ISP-{n:03d} · Internal")
            canvas.drawRightString(19 * cm, 1.2 * cm, f"Page {doc.page}")
            canvas.restoreState()

        path = root / f"policy-{n:02d}.pdf"
        template = SimpleDocTemplate(str(path), pagesize=A4, title=title, author="Security")
        template.build(story, onFirstPage=footer, onLaterPages=footer)
        paths.append(path)
    return paths


def docx_corpus(root: Path, rng: random.Random, scale: float) -> list[Path]:
    """Operations handbooks: headings on three levels, numbered steps, nested bullets,
    bold lead-ins and tables."""
    import docx

    paths = []
    for n in range(1, scaled(6, scale) + 1):
        prose = Prose(rng)
        document = docx.Document()
        props = document.core_properties
        props.author, props.created, props.modified, props.revision = "Ops", FIXED, FIXED, 1
        service = rng.choice(SERVICES)
        document.add_heading(f"{service} operations handbook", 0)
        for _ in range(60):
            document.add_heading(rng.choice(TOPICS), level=1)
            document.add_paragraph(prose.paragraph())
            for _ in range(rng.randint(2, 4)):
                document.add_heading(rng.choice(SUBTOPICS), level=2)
                document.add_paragraph(prose.paragraph())
                if rng.random() < 0.5:
                    for _ in range(rng.randint(3, 7)):
                        document.add_paragraph(prose.sentence(), style="List Number")
                if rng.random() < 0.4:
                    for _ in range(rng.randint(2, 5)):
                        document.add_paragraph(prose.sentence(), style="List Bullet")
                        if rng.random() < 0.3:
                            document.add_paragraph(prose.command(), style="List Bullet 2")
                if rng.random() < 0.3:
                    lead = document.add_paragraph()
                    lead.add_run(rng.choice(["Note: ", "Warning: ", "Tip: "])).bold = True
                    lead.add_run(prose.sentence())
                if rng.random() < 0.3:
                    document.add_heading(rng.choice(SUBTOPICS), level=3)
                    document.add_paragraph(prose.paragraph(1, 3))
                if rng.random() < 0.35:
                    table = document.add_table(rows=1, cols=4)
                    table.style = "Table Grid"
                    for cell, name in zip(
                        table.rows[0].cells, ["Service", "Owner", "Region", "Action"], strict=True
                    ):
                        cell.text = name
                    for _ in range(rng.randint(3, 8)):
                        cells = table.add_row().cells
                        cells[0].text = rng.choice(SERVICES)
                        cells[1].text = rng.choice(TEAMS)
                        cells[2].text = rng.choice(REGIONS)
                        cells[3].text = f"{rng.choice(ACTIONS)} {rng.choice(OBJECTS)}"
        out = io.BytesIO()
        document.save(out)
        path = root / f"handbook-{n:02d}.docx"
        path.write_bytes(fixed_zip(out.getvalue()))
        paths.append(path)
    return paths


def pptx_corpus(root: Path, rng: random.Random, scale: float) -> list[Path]:
    """Review decks: a title slide, bullet slides on three levels, table slides, two-column
    slides and speaker notes."""
    from pptx import Presentation
    from pptx.util import Inches

    paths = []
    for n in range(1, scaled(8, scale) + 1):
        prose = Prose(rng)
        deck = Presentation()
        props = deck.core_properties
        props.author, props.created, props.modified, props.revision = "Ops", FIXED, FIXED, 1
        first = deck.slides.add_slide(deck.slide_layouts[0])
        first.shapes.title.text = f"{rng.choice(SERVICES)} quarterly operations review"
        first.placeholders[1].text = f"{rng.choice(TEAMS)} team · Q{rng.randint(1, 4)} 2024"
        for _ in range(50):
            roll = rng.random()
            if roll < 0.6:
                slide = deck.slides.add_slide(deck.slide_layouts[1])
                slide.shapes.title.text = rng.choice(TOPICS)
                frame = slide.placeholders[1].text_frame
                frame.text = prose.sentence()
                for _ in range(rng.randint(2, 6)):
                    para = frame.add_paragraph()
                    para.text = prose.sentence()
                    para.level = rng.choice([0, 0, 1, 1, 2])
            elif roll < 0.85:
                slide = deck.slides.add_slide(deck.slide_layouts[5])
                slide.shapes.title.text = f"{rng.choice(SUBTOPICS)}: status"
                rows = rng.randint(4, 9)
                grid = slide.shapes.add_table(
                    rows, 4, Inches(0.5), Inches(1.5), Inches(9), Inches(0.4) * rows
                ).table
                for c, name in enumerate(["Service", "Owner", "Incidents", "Availability"]):
                    grid.cell(0, c).text = name
                for r in range(1, rows):
                    grid.cell(r, 0).text = rng.choice(SERVICES)
                    grid.cell(r, 1).text = rng.choice(TEAMS)
                    grid.cell(r, 2).text = str(rng.randint(0, 12))
                    grid.cell(r, 3).text = f"{rng.uniform(99.0, 99.999):.3f} %"
            else:
                slide = deck.slides.add_slide(deck.slide_layouts[3])
                slide.shapes.title.text = f"{rng.choice(TOPICS)}: before and after"
                slide.placeholders[1].text_frame.text = prose.paragraph(1, 2)
                slide.placeholders[2].text_frame.text = prose.paragraph(1, 2)
            if rng.random() < 0.5:
                slide.notes_slide.notes_text_frame.text = prose.paragraph()
        out = io.BytesIO()
        deck.save(out)
        path = root / f"review-{n:02d}.pptx"
        path.write_bytes(fixed_zip(out.getvalue()))
        paths.append(path)
    return paths


def xlsx_corpus(root: Path, rng: random.Random, scale: float) -> list[Path]:
    """Workbooks of three sheets: an asset inventory, an incident log (dates, free text)
    and a budget of numbers."""
    import openpyxl  # type: ignore[import-untyped,unused-ignore]

    paths = []
    for n in range(1, scaled(5, scale) + 1):
        prose = Prose(rng)
        book = openpyxl.Workbook()
        book.properties.creator, book.properties.created = "Ops", FIXED
        inventory = book.worksheets[0]
        inventory.title = "Inventory"
        inventory.append(
            [
                *["Asset", "Hostname", "Environment", "Owner", "Region", "vCPU"],
                *["Memory GiB", "Monthly cost", "Last patched", "Notes"],
            ]
        )
        for r in range(2500):
            service = rng.choice(SERVICES)
            inventory.append(
                [
                    f"AS-{n}{r:05d}",
                    f"{service}-{rng.randint(1, 40):02d}.{rng.choice(REGIONS)}.internal",
                    rng.choice(["prod", "staging", "dev"]),
                    rng.choice(TEAMS),
                    rng.choice(REGIONS),
                    rng.choice([2, 4, 8, 16, 32]),
                    rng.choice([4, 8, 16, 32, 64, 128]),
                    round(rng.uniform(20, 4000), 2),
                    FIXED - timedelta(days=rng.randint(0, 400)),
                    prose.sentence() if rng.random() < 0.2 else None,
                ]
            )
        incidents = book.create_sheet("Incidents")
        incidents.append(["ID", "Opened", "Severity", "Service", "Summary", "Minutes", "Cause"])
        for r in range(1200):
            incidents.append(
                [
                    f"INC-{n}{r:04d}",
                    FIXED - timedelta(minutes=rng.randint(0, 500_000)),
                    rng.choice(["SEV1", "SEV2", "SEV3", "SEV4"]),
                    rng.choice(SERVICES),
                    prose.sentence(),
                    rng.randint(3, 900),
                    rng.choice(["deploy", "capacity", "dependency", "config", "hardware"]),
                ]
            )
        budget = book.create_sheet("Budget")
        budget.append(["Cost centre", "Q1", "Q2", "Q3", "Q4", "Total"])
        for r in range(400):
            quarters = [round(rng.uniform(1_000, 90_000), 2) for _ in range(4)]
            budget.append([f"CC-{r:04d} {rng.choice(TEAMS)}", *quarters, round(sum(quarters), 2)])
        out = io.BytesIO()
        book.save(out)
        path = root / f"operations-{n:02d}.xlsx"
        path.write_bytes(fixed_zip(out.getvalue()))
        paths.append(path)
    return paths
