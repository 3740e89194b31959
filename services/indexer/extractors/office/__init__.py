"""Word, PowerPoint and Excel files as canonical Markdown, so one parser cuts them all.

Each format keeps the structure its authors gave it, in the terms the Markdown parser
understands (`indexer.parsers.markdown`): Word in `docx`, PowerPoint in `pptx`, Excel in
`xlsx`; what they share (the writer, tables, the checks before a library opens a file)
is in `common`.
"""

from __future__ import annotations

from indexer.extractors.office.docx import DOCX, DocxExtractor
from indexer.extractors.office.pptx import PPTX, PptxExtractor
from indexer.extractors.office.xlsx import XLSX, XlsxExtractor

__all__ = ["DOCX", "PPTX", "XLSX", "DocxExtractor", "PptxExtractor", "XlsxExtractor"]
