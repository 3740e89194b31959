"""The HTML and notebook corpora of the formats benchmark (bench/formats.py): wiki-export
pages and Jupyter notebooks, written as text here rather than by a library.

What an HTML or notebook extractor is up against is what surrounds the content: a wiki
page's navigation, sidebar, scripts and macros, a notebook's outputs (HTML tables, PNG
plots, tracebacks). These builders write that around the same seeded prose the other
document corpora use (formats_corpus.py), so a run sees the same bytes as the last one.
"""

from __future__ import annotations

import json
import random
import struct
import zlib
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from formats_corpus import PEOPLE, SERVICES, SUBTOPICS, TEAMS, TOPICS, Prose, scaled


def html_corpus(root: Path, rng: random.Random, scale: float) -> list[Path]:
    """Wiki-export pages: header, breadcrumbs, a page-tree sidebar, inline script and
    style, then the article (headings, steps, nested lists, admonitions, tables whose
    cells hold `|` and entities, code blocks), a footer and more scripts."""
    paths = []
    for n in range(1, scaled(24, scale) + 1):
        prose = Prose(rng)
        title = f"{rng.choice(SERVICES)}: {rng.choice(TOPICS).lower()} runbook"
        tree = "\n".join(
            f'<li><a href="/wiki/OPS/{k}">{rng.choice(SERVICES)} {rng.choice(SUBTOPICS)}</a>'
            + (
                "<ul>"
                + "".join(f'<li><a href="/wiki/OPS/{k}-{j}">Child {j}</a></li>' for j in range(3))
                + "</ul>"
                if rng.random() < 0.2
                else ""
            )
            + "</li>"
            for k in range(60)
        )
        sections = []
        for s, topic in enumerate(rng.sample(TOPICS, k=8), 1):
            anchor = f"s{s}"
            parts = [f'<h2 id="{anchor}">{topic}</h2>', f"<p>{escape(prose.paragraph())}</p>"]
            for _ in range(rng.randint(1, 3)):
                parts.append(f"<h3>{rng.choice(SUBTOPICS)}</h3>")
                parts.append(
                    f'<p>{escape(prose.sentence())} See <a href="/wiki/OPS/{rng.randint(1, 99)}">'
                    f"the {rng.choice(SERVICES)} page</a> and run <code>{escape(prose.command())}"
                    f"</code>. <strong>{escape(prose.sentence())}</strong></p>"
                )
                if rng.random() < 0.5:
                    steps = "".join(
                        f"<li>{escape(prose.sentence())}</li>" for _ in range(rng.randint(3, 7))
                    )
                    parts.append(f"<ol>{steps}</ol>")
                if rng.random() < 0.4:
                    nested = "".join(
                        f"<li>{escape(prose.sentence())}<ul><li>{escape(prose.command())}</li>"
                        "</ul></li>"
                        for _ in range(rng.randint(2, 4))
                    )
                    parts.append(f"<ul>{nested}</ul>")
                if rng.random() < 0.3:
                    parts.append(
                        '<div class="confluence-information-macro '
                        'confluence-information-macro-warning"><span class="aui-icon"></span>'
                        f'<div class="confluence-information-macro-body"><p>'
                        f"{escape(prose.sentence())}</p></div></div>"
                    )
                if rng.random() < 0.4:
                    rows = "".join(
                        f"<tr><td>{rng.choice(SERVICES)}</td><td>{rng.choice(TEAMS)} &amp; "
                        f"{rng.choice(TEAMS)}</td><td><code>grep -E 'ERROR|FATAL'</code></td>"
                        f"<td>{escape(prose.sentence())}</td></tr>"
                        for _ in range(rng.randint(3, 10))
                    )
                    parts.append(
                        '<div class="table-wrap"><table class="confluenceTable"><thead><tr>'
                        "<th>Service</th><th>Owners</th><th>Filter</th><th>Action</th></tr>"
                        f"</thead><tbody>{rows}</tbody></table></div>"
                    )
                if rng.random() < 0.3:
                    lines = "\n".join(prose.command() for _ in range(rng.randint(2, 6)))
                    parts.append(
                        '<div class="code panel"><pre><code class="language-bash">'
                        f"# {escape(prose.sentence())}\n{escape(lines)}</code></pre></div>"
                    )
            sections.append("\n".join(parts))
        toc = "".join(f'<li><a href="#s{s}">Section {s}</a></li>' for s in range(1, 9))
        article = "\n".join(sections)
        page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} - Platform Wiki</title>
<link rel="stylesheet" href="/s/batch.css">
<style>body{{font-family:sans-serif}} .sidebar{{width:18em;float:left}} .toc li{{margin:0}}</style>
<script>window.WIKI={{pageId:{10_000 + n},space:"OPS",user:"anonymous"}};
function toggle(id){{document.getElementById(id).classList.toggle("open")}}</script>
</head><body class="wiki-page">
<header id="header"><div class="logo"><a href="/">Platform Wiki</a></div>
<form class="search" action="/search"><input type="search" name="q" placeholder="Search">
</form><ul class="user-menu"><li><a href="/login">Log in</a></li></ul></header>
<nav class="breadcrumbs" aria-label="Breadcrumb"><ol><li><a href="/wiki">Spaces</a></li>
<li><a href="/wiki/OPS">Operations</a></li><li><a href="/wiki/OPS/runbooks">Runbooks</a></li>
</ol></nav>
<div class="layout">
<aside class="sidebar"><h2>Page tree</h2><ul class="page-tree">
{tree}
</ul></aside>
<main id="main-content"><article>
<h1 id="title-text">{escape(title)}</h1>
<div class="page-metadata">Created by <a href="/people/{n}">{rng.choice(PEOPLE)}</a>, last
modified by {rng.choice(PEOPLE)} on 2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}</div>
<div class="toc-macro"><ul class="toc">{toc}</ul></div>
{article}
</article></main></div>
<footer id="footer"><p>Powered by the wiki · <a href="/about">About</a></p>
<ul><li><a href="/bug">Report a bug</a></li><li><a href="/news">News</a></li></ul></footer>
<script src="/s/app.js"></script>
<script>(function(){{var t=Date.now();window.addEventListener("load",function(){{
navigator.sendBeacon("/analytics",JSON.stringify({{p:{n},t:Date.now()-t}}))}})}})();</script>
</body></html>
"""
        path = root / f"wiki-{n:02d}.html"
        path.write_text(page, encoding="utf-8")
        paths.append(path)
    return paths


def png(rng: random.Random, width: int, height: int) -> bytes:
    """A real PNG of noise (the size of a small plot), as a notebook output embeds it."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 6))
        + chunk(b"IEND", b"")
    )


def notebook_corpus(root: Path, rng: random.Random, scale: float) -> list[Path]:
    """Analysis notebooks (nbformat 4.5): Markdown cells with headings and lists, code
    cells with stream output, HTML tables, PNG plots and an error traceback."""
    import base64

    paths = []
    for n in range(1, scaled(12, scale) + 1):
        prose = Prose(rng)
        cells: list[dict[str, Any]] = []
        count = 0

        def lines(text: str) -> list[str]:
            parts = text.split("\n")
            return [p + "\n" for p in parts[:-1]] + [parts[-1]]

        for s in range(1, 16):
            topic = rng.choice(TOPICS)
            bullets = "\n".join(f"- {prose.sentence()}" for _ in range(rng.randint(1, 4)))
            cells.append(
                {
                    "cell_type": "markdown",
                    "id": f"md-{n}-{s}",
                    "metadata": {},
                    "source": lines(f"## {s}. {topic}\n\n{prose.paragraph()}\n\n{bullets}"),
                }
            )
            for _ in range(rng.randint(1, 3)):
                count += 1
                service = rng.choice(SERVICES)
                since = f"2024-0{rng.randint(1, 9)}-01"
                source = (
                    f"df = load_incidents(service={service!r}, since={since!r})\n"
                    f"summary = df.groupby('severity')['minutes'].agg(['count', 'median'])\n"
                    f"print(f'{{len(df)}} incidents for {service}')\n"
                    "summary"
                )
                outputs: list[dict[str, Any]] = [
                    {
                        "name": "stdout",
                        "output_type": "stream",
                        "text": [f"{rng.randint(10, 900)} incidents for {service}\n"],
                    }
                ]
                roll = rng.random()
                if roll < 0.5:
                    body = "".join(
                        f"<tr><th>SEV{k}</th><td>{rng.randint(1, 99)}</td>"
                        f"<td>{rng.uniform(5, 300):.1f}</td></tr>\n"
                        for k in range(1, 5)
                    )
                    plain = "\n".join(
                        f"SEV{k}  {rng.randint(1, 99):>5}  {rng.uniform(5, 300):>7.1f}"
                        for k in range(1, 5)
                    )
                    outputs.append(
                        {
                            "data": {
                                "text/html": lines(
                                    '<div><table border="1" class="dataframe">\n<thead><tr>'
                                    "<th></th><th>count</th><th>median</th></tr></thead>\n"
                                    f"<tbody>\n{body}</tbody></table></div>"
                                ),
                                "text/plain": lines(f"          count   median\n{plain}"),
                            },
                            "execution_count": count,
                            "metadata": {},
                            "output_type": "execute_result",
                        }
                    )
                elif roll < 0.8:
                    image = base64.b64encode(png(rng, 90, 60)).decode("ascii")
                    outputs.append(
                        {
                            "data": {
                                "image/png": image,
                                "text/plain": ["<Figure size 640x480 with 1 Axes>"],
                            },
                            "metadata": {},
                            "output_type": "display_data",
                        }
                    )
                elif roll < 0.9:
                    outputs.append(
                        {
                            "ename": "KeyError",
                            "evalue": "'region'",
                            "output_type": "error",
                            "traceback": [
                                "\x1b[0;31m-------------------------------------------\x1b[0m",
                                "\x1b[0;31mKeyError\x1b[0m      Traceback (most recent call last)",
                                "Cell \x1b[0;32mIn[3], line 2\x1b[0m\n\x1b[1;32m----> 2\x1b[0m "
                                "df['region']",
                                "\x1b[0;31mKeyError\x1b[0m: 'region'",
                            ],
                        }
                    )
                cells.append(
                    {
                        "cell_type": "code",
                        "execution_count": count,
                        "id": f"code-{n}-{count}",
                        "metadata": {},
                        "outputs": outputs,
                        "source": lines(source),
                    }
                )
        notebook = {
            "cells": cells,
            "metadata": {
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                "language_info": {"name": "python", "version": "3.11.9"},
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        path = root / f"analysis-{n:02d}.ipynb"
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", "utf-8")
        paths.append(path)
    return paths
