"""The notebook extractor: cells in order as Markdown (markdown verbatim, code fenced in the
kernel's language, raw as plain text), outputs dropped; nbformat 4 and 3; malformed or
oversized notebooks refused with the reason, never with another error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from govindex.core.errors import TooLarge, Unreadable
from govindex.core.records import ChunkKind
from indexer.extractors.base import Limits
from indexer.extractors.notebook import MAX_CELLS, NOTEBOOK, NotebookExtractor
from indexer.extractors.regions import cut as cut_regions
from indexer.parsers import PARSERS

LIMITS = Limits()


def lines(text: str) -> list[str]:
    """A cell's source as Jupyter saves it: a list of lines that keep their newline."""
    return text.splitlines(keepends=True)


def markdown(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": "m", "metadata": {}, "source": lines(text)}


def code(text: str, outputs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "execution_count": 1,
        "id": "c",
        "metadata": {"tags": []},
        "outputs": outputs or [],
        "source": lines(text),
    }


def raw(text: str) -> dict[str, Any]:
    return {"cell_type": "raw", "id": "r", "metadata": {"format": "text/x-rst"}, "source": text}


def notebook(cells: list[dict[str, Any]], language: str = "python") -> bytes:
    """A notebook as JupyterLab writes it (nbformat 4.5, indent 1, a trailing newline)."""
    document = {
        "cells": cells,
        "metadata": {
            "kernelspec": {
                "display_name": "Python 3 (ipykernel)",
                "language": language,
                "name": "python3",
            },
            "language_info": {
                "codemirror_mode": {"name": "ipython", "version": 3},
                "file_extension": ".py",
                "mimetype": "text/x-python",
                "name": "python",
                "nbconvert_exporter": "python",
                "pygments_lexer": "ipython3",
                "version": "3.11.7",
            },
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode()


def text_of(data: bytes, limits: Limits = LIMITS) -> str:
    return NOTEBOOK.extract(data, limits).text


def chunks_of(text: str) -> list:  # type: ignore[type-arg]
    chunks = PARSERS["markdown"].parse(text).chunks
    for chunk in chunks:
        assert text[chunk.span.char_start : chunk.span.char_end] == chunk.text
    return chunks


PLOT = {
    "data": {
        "image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQAB"
        "pfZFQAAAAABJRU5ErkJggg==\n",
        "text/plain": ["<Figure size 640x480 with 1 Axes>"],
    },
    "metadata": {},
    "output_type": "display_data",
}
STREAM = {"name": "stdout", "output_type": "stream", "text": ["rows: 1204 SECRET-OUTPUT\n"]}
ERROR = {
    "ename": "KeyError",
    "evalue": "'region'",
    "output_type": "error",
    "traceback": ["\u001b[0;31mKeyError\u001b[0m: 'region'"],
}


def incident_analysis() -> bytes:
    """A realistic analysis notebook: a title cell, a procedure, code with plots, a
    streamed output and an error, a table in Markdown, a raw cell for nbconvert."""
    return notebook(
        [
            markdown("# Checkout latency analysis\n\nWhy p99 rose after the 10:42 deploy.\n"),
            markdown(
                "## Steps\n\n1. Load the traces.\n2. Group them by region.\n"
                "3. Compare before and after the deploy.\n"
            ),
            code(
                'import pandas as pd\n\ntraces = pd.read_parquet("traces.parquet")\n'
                'print("rows:", len(traces))',
                [STREAM],
            ),
            code('traces.groupby("region").p99.plot()', [PLOT]),
            code('traces["region"]', [ERROR]),
            markdown(
                "## Findings\n\n| region | p99 before | p99 after |\n|---|---|---|\n"
                "| eu-west | 180 ms | 410 ms |\n| us-east | 170 ms | 175 ms |\n"
            ),
            raw(".. note::\n\n    # rendered by Sphinx, not a heading\n\n1. not a step\n"),
            code(""),
            markdown(""),
        ]
    )


def test_a_realistic_notebook_is_its_cells_in_order_without_outputs() -> None:
    text = text_of(incident_analysis())
    assert text == (
        "# Checkout latency analysis\n\nWhy p99 rose after the 10:42 deploy.\n\n"
        "## Steps\n\n1. Load the traces.\n2. Group them by region.\n"
        "3. Compare before and after the deploy.\n\n"
        'import pandas as pd\n\ntraces = pd.read_parquet("traces.parquet")\n'
        'print("rows:", len(traces))\n\n'
        'traces.groupby("region").p99.plot()\n\n'
        'traces["region"]\n\n'
        "## Findings\n\n| region | p99 before | p99 after |\n|---|---|---|\n"
        "| eu-west | 180 ms | 410 ms |\n| us-east | 170 ms | 175 ms |\n\n"
        ".. note::\n\n\\# rendered by Sphinx, not a heading\n\n1\\. not a step\n"
    )
    assert "SECRET-OUTPUT" not in text and "iVBOR" not in text and "KeyError" not in text
    # Each Python cell is a region the Python parser cuts, at its exact offsets.
    regions = NOTEBOOK.extract(incident_analysis(), Limits()).regions
    assert [text[r.start : r.end] for r in regions] == [
        'import pandas as pd\n\ntraces = pd.read_parquet("traces.parquet")\n'
        'print("rows:", len(traces))',
        'traces.groupby("region").p99.plot()',
        'traces["region"]',
    ]
    assert {r.parser for r in regions} == {"python"}
    chunks = chunks_of(text)
    steps = [c for c in chunks if c.kind is ChunkKind.STEP]
    assert [s.labels for s in steps] == [("step:1",), ("step:2",), ("step:3",)]
    assert all(s.heading_path == ("Checkout latency analysis", "Steps") for s in steps)
    groups = [c for c in chunks if c.kind is ChunkKind.ROW_GROUP]
    assert len(groups) == 1 and groups[0].labels == ("key:eu-west", "key:us-east")
    assert groups[0].heading_path[-1] == "Findings"
    assert "not a step" in chunks[-1].text and chunks[-1].kind is not ChunkKind.STEP


def test_code_cells_take_the_kernels_language() -> None:
    r_kernel = json.loads(notebook([code("summary(df)")], language="R"))
    assert text_of(json.dumps(r_kernel).encode()) == "```R\nsummary(df)\n```\n"
    del r_kernel["metadata"]["kernelspec"]  # language_info names python: the Python parser's
    assert text_of(json.dumps(r_kernel).encode()) == "summary(df)\n"
    r_kernel["metadata"] = {}
    assert text_of(json.dumps(r_kernel).encode()) == "```\nsummary(df)\n```\n"
    fenced = text_of(notebook([code('s = """\n```\n"""')], language="R"))
    assert fenced == '````R\ns = """\n```\n"""\n````\n'


def test_nbformat_3_worksheets_with_heading_cells() -> None:
    v3 = {
        "metadata": {"name": "latex test"},
        "nbformat": 3,
        "nbformat_minor": 0,
        "worksheets": [
            {
                "cells": [
                    {"cell_type": "heading", "level": 1, "metadata": {}, "source": ["Test"]},
                    {"cell_type": "markdown", "metadata": {}, "source": ["**Lorem** ipsum."]},
                    {
                        "cell_type": "code",
                        "collapsed": False,
                        "input": ['print("hello")'],
                        "language": "python",
                        "metadata": {},
                        "outputs": [
                            {"output_type": "stream", "stream": "stdout", "text": ["hello\n"]}
                        ],
                        "prompt_number": 1,
                    },
                    {"cell_type": "heading", "level": 2, "metadata": {}, "source": ["Pyout"]},
                ],
                "metadata": {},
            }
        ],
    }
    text = text_of(json.dumps(v3).encode())
    assert text == '# Test\n\n**Lorem** ipsum.\n\nprint("hello")\n\n## Pyout\n'


def test_markdown_cells_cannot_swallow_the_cells_after_them() -> None:
    text = text_of(notebook([markdown("```python\nx = 1"), markdown("# After")]))
    assert text == "```python\nx = 1\n```\n\n# After\n"
    assert [c.heading_path for c in chunks_of(text)][-1] == ("After",)
    closed = text_of(notebook([markdown("~~~\ncode\n~~~~\n"), markdown("# B")]))
    assert closed == "~~~\ncode\n~~~~\n\n# B\n"


def test_a_yaml_header_cell_is_text_not_frontmatter() -> None:
    text = text_of(notebook([markdown('---\nacl: ["group:all"]\n---\n# Title')]))
    assert text.startswith("\\---\n")
    assert PARSERS["markdown"].parse(text).frontmatter == {}


def test_the_extractor_says_what_it_is() -> None:
    assert (NOTEBOOK.name, NOTEBOOK.version, NOTEBOOK.binary) == ("ipynb", "1.1.0", False)
    assert NOTEBOOK.suffixes == (".ipynb",)
    assert text_of(notebook([])) == ""


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "not valid JSON"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8"),
        (b'{"cells": [', "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"metadata": {}}', "neither `cells`"),
        (b'{"cells": {}, "nbformat": 4}', "not a list"),
        (b'{"cells": [], "nbformat": 5}', "nbformat 5"),
        (b'{"cells": [{"cell_type": "widget", "source": ""}]}', "'widget'"),
        (b'{"cells": [{"cell_type": "heading", "source": "x"}], "nbformat": 4}', "'heading'"),
        (b'{"cells": [{"cell_type": "code", "source": [1, 2]}]}', "neither text nor lines"),
        (b'{"cells": ["a cell"]}', "not an object"),
        (b'{"worksheets": [{"cells": 3}], "nbformat": 3}', "no list of cells"),
        (b"[" * 100_000 + b"]" * 100_000, "too deeply"),
        (b'{"cells": [], "n": ' + b"9" * 5_000 + b"}", "not valid JSON"),
    ],
)
def test_malformed_notebooks_are_unreadable(data: bytes, reason: str) -> None:
    with pytest.raises(Unreadable, match=reason):
        text_of(data)


def test_a_truncated_notebook_is_unreadable() -> None:
    data = incident_analysis()
    for cut in range(0, len(data) - 2, 97):
        with pytest.raises(Unreadable):
            text_of(data[:cut])


def test_more_cells_than_the_limit_are_refused_naming_the_figure() -> None:
    cells = b'{"cell_type": "raw", "source": ""},' * MAX_CELLS
    data = b'{"nbformat": 4, "cells": [' + cells + b'{"cell_type": "raw", "source": ""}]}'
    with pytest.raises(TooLarge, match=f"{MAX_CELLS + 1:,} cells, over the {MAX_CELLS:,}"):
        text_of(data)
    text_of(b'{"nbformat": 4, "cells": [' + cells[:-1] + b"]}")  # exactly the limit: read


def test_the_text_and_byte_limits_are_named_when_passed() -> None:
    big = notebook([markdown("word " * 300)] * 3)
    with pytest.raises(TooLarge, match="more than 1,000 characters"):
        text_of(big, Limits(max_text_chars=1_000))
    with pytest.raises(TooLarge, match="100-byte limit"):
        text_of(big, Limits(max_bytes=100))


# --- properties -------------------------------------------------------------------------

_TEXT = st.text(st.sampled_from(list("ab #>-*1.`~|\n\t é")), max_size=40)
_CELLS = st.lists(st.one_of(_TEXT.map(markdown), _TEXT.map(code), _TEXT.map(raw)), max_size=8)


@settings(max_examples=150, deadline=None)
@given(_CELLS, st.sampled_from(["python", "R", "julia", "c++"]))
def test_same_bytes_same_text_and_chunks_are_faithful(
    cells: list[dict[str, Any]], language: str
) -> None:
    data = notebook(cells, language)
    text = NOTEBOOK.extract(data, LIMITS).text
    assert NotebookExtractor().extract(data, LIMITS).text == text
    chunks_of(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=1_000))
def test_any_bytes_give_text_or_a_refusal(data: bytes) -> None:
    try:
        text = NOTEBOOK.extract(data, LIMITS).text
    except (Unreadable, TooLarge):
        return
    chunks_of(text)


def test_code_cells_are_cut_by_their_languages_parser_under_their_section() -> None:
    data = notebook(
        [
            markdown("# Load\n\nRead the traces."),
            code("import json\n\n\ndef load(path):\n    return json.load(open(path))"),
            markdown("## Plot"),
            code("SELECT region, p99 FROM traces;"),
        ]
    )
    extracted = NOTEBOOK.extract(data, Limits())
    parsed = cut_regions(extracted)
    text = extracted.text
    for c in parsed.chunks:  # every chunk is the canonical text at its span
        assert text[c.span.char_start : c.span.char_end] == c.text
        assert text.splitlines()[c.span.line_start - 1] == c.text.splitlines()[0]
    (load,) = [c for c in parsed.chunks if "function:load" in c.labels]
    assert load.kind is ChunkKind.FUNCTION
    section = parsed.chunks[load.parent_ordinal] if load.parent_ordinal is not None else None
    assert section is not None and section.heading_path == ("Load",)
    assert [c.ordinal for c in parsed.chunks] == list(range(len(parsed.chunks)))
    assert "python" in {r.parser for r in extracted.regions}  # the kernel's, for every cell
