"""The extractors the indexer runs, by format (the registry reads `ALL`)."""

from __future__ import annotations

from indexer.extractors.base import Extractor
from indexer.extractors.html import HTML
from indexer.extractors.notebook import NOTEBOOK
from indexer.extractors.office import DOCX, PPTX, XLSX
from indexer.extractors.pdf import PDF

ALL: list[Extractor] = [PDF, DOCX, PPTX, XLSX, HTML, NOTEBOOK]
