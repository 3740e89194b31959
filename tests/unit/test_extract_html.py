"""The HTML extractor: wiki exports, static sites and Confluence storage format become
Markdown the Markdown parser cuts into sections, steps and row groups, without the site's
chrome; hostile pages are refused with the limit they broke, never with another error."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from govindex.core.errors import TooLarge, Unreadable
from govindex.core.records import ChunkKind
from indexer.extractors.base import Limits
from indexer.extractors.html import (
    HTML,
    MAX_ATTRIBUTES,
    MAX_DEPTH,
    MAX_ELEMENTS,
    HtmlExtractor,
    escape_line,
)
from indexer.parsers import PARSERS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
LIMITS = Limits()


def text_of(page: str | bytes, limits: Limits = LIMITS) -> str:
    data = page.encode("utf-8") if isinstance(page, str) else page
    return HTML.extract(data, limits).text


def chunks_of(text: str) -> list:  # type: ignore[type-arg]
    chunks = PARSERS["markdown"].parse(text).chunks
    for chunk in chunks:
        assert text[chunk.span.char_start : chunk.span.char_end] == chunk.text
    return chunks


NAVIGATION = (
    "Jump to navigation",
    "Navigation menu",
    "Main page",
    "Recent changes",
    "Random page",
    "Search Ops Wiki",
    "Contents",
    "[edit]",
    "edit source",
    "Retrieved from",
    "Categories",
    "Privacy policy",
    "last edited",
    "We use cookies",
    "RLCONF",
    "mw.loader",
    "From Ops Wiki",
    ".mw-body",
)


def wiki_page() -> str:
    """A page as MediaWiki exports it: skin chrome around the article (jump links, the
    sidebar, personal tools, search, a table of contents, edit-section links, categories,
    the footer), scripts and styles, a cookie notice."""
    edit = (
        '<span class="mw-editsection"><span class="mw-editsection-bracket">[</span>'
        '<a href="/index.php?title=Database_failover&amp;action=edit&amp;section={n}" '
        'title="Edit section">edit source</a><span class="mw-editsection-bracket">]</span>'
        "</span>"
    )
    rows = "".join(
        f"<tr><td>db-{i}</td><td>{'primary' if i == 1 else 'replica'}</td>"
        f"<td>eu-west-{i % 3 + 1}</td></tr>\n"
        for i in range(1, 6)
    )
    return f"""<!DOCTYPE html>
<html class="client-nojs" lang="en" dir="ltr">
<head>
<meta charset="UTF-8">
<title>Database failover - Ops Wiki</title>
<script>document.documentElement.className="client-js";RLCONF={{"wgPageName":"Database_failover"}};</script>
<link rel="stylesheet" href="/load.php?modules=skins.vector.styles&amp;only=styles">
<style>.mw-body {{ margin-left: 11em; }}</style>
<meta name="generator" content="MediaWiki 1.39.3">
</head>
<body class="mediawiki ltr sitedir-ltr skin-vector action-view">
<div class="cookie-notice" id="cookie-banner">We use cookies to keep you signed in.
<button>OK</button></div>
<div id="mw-page-base" class="noprint"></div>
<div id="mw-head-base" class="noprint"></div>
<div id="content" class="mw-body" role="main">
  <a id="top"></a>
  <div id="siteNotice"></div>
  <h1 id="firstHeading" class="firstHeading mw-first-heading">Database failover</h1>
  <div id="bodyContent" class="vector-body">
    <div id="siteSub" class="noprint">From Ops Wiki</div>
    <div id="contentSub"></div>
    <a class="mw-jump-link" href="#mw-head">Jump to navigation</a>
    <a class="mw-jump-link" href="#searchInput">Jump to search</a>
    <div id="mw-content-text" class="mw-body-content mw-content-ltr" lang="en" dir="ltr">
    <div class="mw-parser-output">
<p>Use this runbook when the <b>primary</b> stops accepting writes for more than
two minutes. See <a href="/wiki/Replication" title="Replication">Replication</a>.</p>
<div id="toc" class="toc" role="navigation" aria-labelledby="mw-toc-heading">
<div class="toctitle"><h2 id="mw-toc-heading">Contents</h2></div>
<ul><li class="toclevel-1"><a href="#Prerequisites"><span class="tocnumber">1</span>
<span class="toctext">Prerequisites</span></a></li></ul></div>
<h2><span class="mw-headline" id="Prerequisites">Prerequisites</span>{edit.format(n=1)}</h2>
<ul><li>Shell access to the database hosts.</li>
<li>The <code>dbctl</code> tool, version 4 or later.</li></ul>
<h2><span class="mw-headline" id="Hosts">Hosts</span>{edit.format(n=2)}</h2>
<table class="wikitable">
<tbody><tr><th>Host</th><th>Role</th><th>Zone</th></tr>
{rows}</tbody></table>
<h2><span class="mw-headline" id="Steps">Steps</span>{edit.format(n=3)}</h2>
<ol>
<li>Freeze deploys in the <i>#ops</i> channel.</li>
<li>Promote the replica:
<div class="mw-highlight mw-highlight-lang-bash mw-content-ltr" dir="ltr">
<pre><span></span>dbctl promote --replica db-2
<span class="nb">echo</span> done</pre></div></li>
<li>Confirm that writes succeed.</li>
</ol>
<h2><span class="mw-headline" id="Rollback">Rollback</span>{edit.format(n=4)}</h2>
<p>Demote the replica and page the database owner.</p>
<!--
NewPP limit report
-->
</div>
<noscript><img src="/index.php?title=Special:CentralAutoLogin" alt="" width="1" height="1">
</noscript>
<div class="printfooter">Retrieved from "https://wiki.example/index.php?title=Database_failover"</div>
    </div>
    <div id="catlinks" class="catlinks" data-mw="interface"><div id="mw-normal-catlinks">
    <a href="/wiki/Special:Categories">Categories</a>: <ul><li>Runbooks</li></ul></div></div>
  </div>
</div>
<div id="mw-navigation">
  <h2>Navigation menu</h2>
  <div id="mw-head">
    <nav id="p-personal" class="vector-menu" aria-labelledby="p-personal-label">
      <ul><li><a href="/wiki/Special:UserLogin">Log in</a></li></ul></nav>
    <div id="p-search" role="search"><form action="/index.php" id="searchform">
      <input type="search" name="search" placeholder="Search Ops Wiki"></form></div>
  </div>
  <div id="mw-panel">
    <nav id="p-navigation" class="vector-menu vector-menu-portal portal" role="navigation">
      <h3 id="p-navigation-label">Navigation</h3>
      <ul><li><a href="/wiki/Main_Page">Main page</a></li>
      <li><a href="/wiki/Special:RecentChanges">Recent changes</a></li>
      <li><a href="/wiki/Special:Random">Random page</a></li></ul>
    </nav>
  </div>
</div>
<footer id="footer" class="mw-footer" role="contentinfo">
  <ul id="footer-info">
  <li id="footer-info-lastmod"> This page was last edited on 3 May 2024.</li></ul>
  <ul id="footer-places"><li><a href="/wiki/Ops:Privacy">Privacy policy</a></li></ul>
</footer>
<script>(RLQ=window.RLQ||[]).push(function(){{mw.loader.load("ext.gadget")}});</script>
</body>
</html>
"""


def test_a_wiki_export_page_cuts_into_sections_steps_and_row_groups_without_chrome() -> None:
    text = text_of(wiki_page())
    assert text.startswith("# Database failover\n\nUse this runbook when the **primary**")
    for chrome in NAVIGATION:
        assert chrome not in text, chrome
    assert "| Host | Role | Zone |\n| --- | --- | --- |\n| db-1 | primary | eu-west-2 |" in text
    assert "2. Promote the replica:\n\n   ```bash\n   dbctl promote --replica db-2\n" in text
    chunks = chunks_of(text)
    paths = {c.heading_path for c in chunks}
    assert ("Database failover", "Steps") in paths and ("Database failover", "Rollback") in paths
    steps = [c for c in chunks if c.kind is ChunkKind.STEP]
    assert [s.labels for s in steps] == [("step:1",), ("step:2",), ("step:3",)]
    assert "echo done" in steps[1].text and steps[1].heading_path[-1] == "Steps"
    groups = [c for c in chunks if c.kind is ChunkKind.ROW_GROUP]
    assert len(groups) == 1 and groups[0].heading_path[-1] == "Hosts"
    assert groups[0].labels == tuple(f"key:db-{i}" for i in range(1, 6))
    roles = {label for c in chunks for label in c.labels if label.startswith("role:")}
    assert roles >= {"role:prerequisites", "role:steps", "role:rollback"}
    for chunk in chunks:
        for chrome in NAVIGATION:
            assert chrome not in chunk.text


CONFLUENCE_EXPORT = """<html><head><title>Ops : Certificate rotation</title>
<link rel="stylesheet" href="styles/site.css" type="text/css" /></head>
<body class="theme-default aui-theme-default">
<div id="page"><div id="main" class="aui-page-panel">
 <div id="main-header">
  <div id="breadcrumb-section"><ol id="breadcrumbs">
   <li class="first"><span><a href="index.html">Ops</a></span></li>
   <li><span><a href="Runbooks_123.html">Runbooks</a></span></li></ol></div>
  <h1 id="title-heading" class="pagetitle"><span id="title-text">Certificate rotation</span></h1>
 </div>
 <div id="content" class="view">
  <div id="main-content" class="wiki-content group">
   <p>Rotate the edge certificate before it expires.</p>
   <h2 id="Certificaterotation-Procedure">Procedure</h2>
   <ol><li>Request a new certificate.</li>
   <li>Install it:<div class="code panel pdl"><div class="codeContent panelContent pdl">
   <pre class="syntaxhighlighter-pre" data-syntaxhighlighter-params="brush: bash; gutter: false"
   data-theme="Confluence">certctl install --host edge-1 | tee install.log</pre></div></div></li>
   <li>Reload the proxy.</li></ol>
   <div class="confluence-information-macro confluence-information-macro-note">
   <span class="aui-icon aui-icon-small aui-iconfont-warning
   confluence-information-macro-icon"></span>
   <div class="confluence-information-macro-body"><p>Never reuse a private key.</p></div></div>
  </div>
 </div>
</div>
<div id="footer" role="contentinfo"><section class="footer-body">
 <p>Document generated by Confluence on May 03, 2024 10:12</p>
 <div id="footer-logo"><a href="http://www.atlassian.com/">Atlassian</a></div>
</section></div></div>
</body></html>"""


def test_a_confluence_html_export_keeps_the_page_and_drops_breadcrumbs_and_footer() -> None:
    text = text_of(CONFLUENCE_EXPORT)
    assert text.startswith("# Certificate rotation\n\nRotate the edge certificate")
    assert "Runbooks" not in text and "Document generated" not in text
    assert "Atlassian" not in text
    assert "   ```bash\n   certctl install --host edge-1 | tee install.log\n   ```" in text
    steps = [c for c in chunks_of(text) if c.kind is ChunkKind.STEP]
    assert len(steps) == 3 and "Never reuse" not in steps[-1].text


STORAGE = """<p>See <ac:link><ri:page ri:content-title="Edge proxies" /></ac:link> and
<ac:link><ri:page ri:content-title="X" />
<ac:plain-text-link-body><![CDATA[the on-call page]]></ac:plain-text-link-body></ac:link>.</p>
<ac:structured-macro ac:name="toc" ac:schema-version="1" />
<h1>Rotation</h1>
<ac:structured-macro ac:name="info" ac:schema-version="1" ac:macro-id="5c1b">
<ac:parameter ac:name="title">Heads up</ac:parameter>
<ac:rich-text-body><p>Rotate during the <strong>change window</strong>.</p></ac:rich-text-body>
</ac:structured-macro>
<ac:structured-macro ac:name="code" ac:schema-version="1">
<ac:parameter ac:name="language">python</ac:parameter>
<ac:parameter ac:name="theme">Midnight</ac:parameter>
<ac:plain-text-body><![CDATA[if days_left < 30 and not renewed:
    print("```rotate```")]]></ac:plain-text-body>
</ac:structured-macro>
<p>State: <ac:structured-macro ac:name="status" ac:schema-version="1">
<ac:parameter ac:name="colour">Green</ac:parameter>
<ac:parameter ac:name="title">DONE</ac:parameter></ac:structured-macro>
tracked in <ac:structured-macro ac:name="jira">
<ac:parameter ac:name="server">JIRA</ac:parameter>
<ac:parameter ac:name="key">OPS-42</ac:parameter></ac:structured-macro></p>
<h2>Action items</h2>
<ac:task-list>
<ac:task><ac:task-id>1</ac:task-id><ac:task-status>complete</ac:task-status>
<ac:task-body>Renew the certificate <ac:link><ri:user ri:account-id="557058" /></ac:link>
</ac:task-body></ac:task>
<ac:task><ac:task-id>2</ac:task-id><ac:task-status>incomplete</ac:task-status>
<ac:task-body>Automate it</ac:task-body></ac:task>
</ac:task-list>
<ac:layout><ac:layout-section ac:type="two_equal"><ac:layout-cell><p>Left cell</p></ac:layout-cell>
<ac:layout-cell><ac:image ac:alt="rotation diagram"><ri:attachment ri:filename="rot.png" />
</ac:image></ac:layout-cell>
</ac:layout-section></ac:layout>
"""


def test_confluence_storage_format_macros_keep_code_and_bodies_and_drop_chrome() -> None:
    text = text_of(STORAGE)
    assert text.startswith("See Edge proxies and the on-call page.\n\n# Rotation\n")
    assert "Rotate during the **change window**." in text
    assert "Heads up" not in text and "Midnight" not in text and "Green" not in text
    code = '````python\nif days_left < 30 and not renewed:\n    print("```rotate```")\n````'
    assert code in text
    assert "State: DONE tracked in OPS-42" in text
    assert "- [x] Renew the certificate\n- [ ] Automate it" in text
    assert "Left cell\n\nrotation diagram\n" in text
    chunks = chunks_of(text)
    actions = [c for c in chunks if c.kind is ChunkKind.ACTION_ITEM]
    assert [a.labels for a in actions] == [("status:done",), ("status:open",)]


def test_a_real_static_site_page_keeps_the_article_only() -> None:
    """MkDocs with the Material theme, as built from this repository's documentation."""
    text = text_of((FIXTURES / "html-mkdocs-material-time.html").read_bytes())
    for chrome in (
        "Skip to content",
        "Initializing search",
        "Table of contents",
        "Made with",
        "Back to top",
        "¶",
        "Getting started",
    ):
        assert chrome not in text, chrome
    assert text.startswith("# Valid time and system time\n\ngovindex keeps two clocks")
    assert "\n## System time: `known_at`\n" in text
    assert "| field | meaning |\n| --- | --- |\n| `recorded_at` | when this version" in text
    assert '```\ngovindex query "failover steps" --tenant acme' in text
    chunks = chunks_of(text)
    steps = [c for c in chunks if c.kind is ChunkKind.STEP]
    assert [s.labels for s in steps] == [("step:1",), ("step:2",), ("step:3",)]
    assert all(s.heading_path[-1] == "Valid time: as_of" for s in steps)
    groups = [c for c in chunks if c.kind is ChunkKind.ROW_GROUP]
    assert groups and "key:`indexed_at`" in groups[0].labels


# --- blocks -----------------------------------------------------------------------------


def test_lists_nest_by_indentation_and_keep_their_numbering() -> None:
    text = text_of(
        "<ol start='4'><li>four<ol><li>sub one</li><li>sub two</li></ol></li>"
        "<li value='9'>nine</li><li></li><li>eleven</li></ol>"
        "<ol reversed><li>c</li><li>b</li><li>a</li></ol>"
        "<ul><li>a<ul><li>b<ul><li>c</li></ul></li></ul></li></ul>"
        "<ul><li>one</li><ul><li>nested straight in the list</li></ul><li>two</li></ul>"
    )
    assert text == (
        "4. four\n\n   1. sub one\n   2. sub two\n9. nine\n11. eleven\n\n"
        "3. c\n2. b\n1. a\n\n"
        "- a\n\n  - b\n\n    - c\n\n"
        "- one\n\n  - nested straight in the list\n- two\n"
    )
    steps = [c for c in chunks_of(text) if c.kind is ChunkKind.STEP]
    assert [s.labels[0] for s in steps][:3] == ["step:4", "step:9", "step:11"]


def test_tables_flatten_spans_escape_pipes_and_keep_cells_on_one_line() -> None:
    text = text_of(
        "<table><caption>Quarterly cost</caption>"
        "<thead><tr><th rowspan=2>Team</th><th colspan=2>Cost</th></tr>"
        "<tr><th>Q1</th><th>Q2</th></tr></thead>"
        "<tbody><tr><td rowspan=2>Search</td><td>1 | 2</td><td><p>three</p><p>lines</p>"
        "<ul><li>here</li></ul></td></tr><tr><td colspan=2>both quarters</td></tr>"
        "<tr><td>Ops</td></tr></tbody></table>"
    )
    assert text == (
        "Quarterly cost\n\n"
        "| Team | Cost / Q1 | Cost / Q2 |\n| --- | --- | --- |\n"
        "| Search | 1 \\| 2 | three lines here |\n"
        "| Search | both quarters |  |\n"
        "| Ops |  |  |\n"
    )
    headless = text_of("<table><tr><td>a</td><td>b</td></tr><tr><td>1</td></tr></table>")
    assert headless == "| a | b |\n| --- | --- |\n| 1 |  |\n"
    layout = text_of("<table><tr><td><h2>Inside</h2><p>a layout cell</p></td></tr></table>")
    assert layout == "## Inside\n\na layout cell\n"
    nested = text_of(
        "<table><tr><th>k</th><th>v</th></tr><tr><td>x</td>"
        "<td><table><tr><td>in</td><td>ner</td></tr></table></td></tr></table>"
    )
    assert nested.endswith("| x | in ner |\n")


def test_code_blocks_keep_their_text_and_the_language_their_classes_name() -> None:
    cases = {
        '<pre><code class="language-python">x = 1</code></pre>': "python",
        '<pre class="lang-sql">SELECT 1</pre>': "sql",
        '<div class="highlight-yaml notranslate"><div class="highlight"><pre>a: 1</pre>'
        "</div></div>": "yaml",
        '<div class="mw-highlight mw-highlight-lang-bash"><pre>ls</pre></div>': "bash",
        '<pre class="brush: java; gutter: false">int x;</pre>': "java",
        '<pre class="sourceCode haskell"><code>main = pure ()</code></pre>': "haskell",
        '<pre><code class="hljs nohighlight">plain</code></pre>': "",
    }
    for page, language in cases.items():
        assert text_of(page).startswith(f"```{language}\n"), page
    text = text_of("<pre>\n  keep  spacing\n<br>a ``` b\n\n\n</pre>")
    assert text == "````\n  keep  spacing\n\na ``` b\n````\n"
    numbered = text_of(
        '<table class="highlighttable"><tr><td class="linenos"><pre>1\n2</pre></td>'
        '<td class="code"><pre><span class="linenos">1</span>a = 1\nb = 2</pre></td></tr></table>'
    )
    assert numbered == "```\na = 1\nb = 2\n```\n"


def test_quotes_definitions_images_links_and_inline_markup() -> None:
    text = text_of(
        "<blockquote><p>first</p><ul><li>quoted item</li></ul></blockquote>"
        "<dl><dt>Operator</dt><dd>A person on call.</dd>"
        "<div><dt>RPO</dt><dt>RTO</dt><dd>Recovery targets.</dd></div></dl>"
        '<p>See <a href="https://x.example/a">the guide</a> <img src="a.png" alt="a chart"> '
        "and run <code>a `b` c</code> <b> now </b><em>please</em>.</p>"
    )
    assert text == (
        "> first\n>\n> - quoted item\n\n"
        "**Operator**: A person on call.\n\n**RPO**\n**RTO**\nRecovery targets.\n\n"
        "See the guide a chart and run ``a `b` c`` **now** please.\n"
    )


def test_page_text_that_looks_like_markdown_stays_text() -> None:
    text = text_of(
        "<h1>Title</h1><p># not a heading</p><p>1. not a step</p><p>- not a bullet</p>"
        "<p>&gt; not a quote</p><p>```</p><p>===</p><p>&lt;div&gt; not html</p>"
        "<p>|---|---|</p><h2>Issue #</h2>"
        "<p>4.1 A clause, as numbered.<br>4.1.2 Its refinement.<br>(a) A point.</p>"
    )
    chunks = chunks_of(text)
    assert [c.heading_path for c in chunks if c.kind is ChunkKind.SECTION] == [
        ("Title",),
        ("Title", "Issue #"),
    ]
    assert not [c for c in chunks if c.kind is ChunkKind.STEP]
    assert "\\# not a heading\n\n1\\. not a step\n\n\\- not a bullet\n\n\\> not a quote" in text
    clauses = [label for c in chunks for label in c.labels if label.startswith("clause:")]
    assert clauses == ["clause:4.1", "clause:4.1.2", "clause:(a)"]
    header = text_of("<p>---</p><p>acl: [public]</p><p>---</p><p>Body</p>")
    assert header.startswith("\\---\n") and PARSERS["markdown"].parse(header).frontmatter == {}
    assert escape_line("§ 4 Access") == "§ 4 Access"
    assert escape_line("--- ") == "\\--- " and escape_line("1) x") == "1\\) x"


def test_main_or_article_is_the_content_and_a_header_in_it_is_kept() -> None:
    page = (
        "<header><p>Site banner</p></header><nav>Menu</nav>"
        "<main><header><h1>The page</h1></header><p>Body.</p><aside>Related</aside></main>"
        "<footer>Footer</footer>"
    )
    assert text_of(page) == "# The page\n\nBody.\n"
    articles = "<p>outside</p><article><h2>One</h2></article><article><h2>Two</h2></article>"
    assert text_of(articles) == "## One\n\n## Two\n"
    assert text_of("<header><p>Site</p></header><p>Body</p>") == "Body\n"


def test_boilerplate_and_hidden_elements_are_dropped_but_layout_wrappers_kept() -> None:
    page = (
        '<div class="content has-sidebar"><p>kept</p>'
        '<div class="site-sidebar">side</div><div id="breadcrumbs">a &gt; b</div>'
        '<div class="navbox">links</div><div hidden>h1</div><span aria-hidden="true">h2</span>'
        '<p style="display: none">h3</p><div role="navigation">h4</div>'
        "<template><p>h5</p></template><svg><text>h6</text></svg>"
        "<form><label>Name</label><input value='h7'></form><p>end</p></div>"
    )
    assert text_of(page) == "kept\n\nend\n"


def test_charsets_the_page_declares_are_used_where_the_bytes_are_not_utf8() -> None:
    latin = b'<meta charset="windows-1252"><p>caf\xe9 \x93quoted\x94</p>'
    assert text_of(latin) == "café “quoted”\n"
    http_equiv = (
        b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
        b"<p>na\xefve \x96 dash</p>"
    )
    assert text_of(http_equiv) == "naïve – dash\n"  # ISO-8859-1 is read as windows-1252
    stale = '<meta charset="iso-8859-1"><p>café</p>'.encode()
    assert text_of(stale) == "café\n"  # already UTF-8: the bytes win over the label
    xml = b'<?xml version="1.0" encoding="iso-8859-15"?><html><body><p>\xa4 5</p></body></html>'
    assert text_of(xml) == "€ 5\n"
    assert text_of(b"\xef\xbb\xbf<p>bom</p>") == "bom\n"
    with pytest.raises(Unreadable, match="not UTF-8"):
        text_of(b"<p>caf\xe9</p>")
    with pytest.raises(Unreadable, match="declares"):
        text_of(b'<meta charset="shift_jis"><p>\x81\x20</p>')
    with pytest.raises(Unreadable, match="declares no other charset"):
        text_of(b'<meta charset="rot13"><p>caf\xe9</p>')


def test_the_extractor_says_what_it_is() -> None:
    assert (HTML.name, HTML.version, HTML.binary) == ("html", "1.0.0", False)
    assert HTML.suffixes == (".html", ".htm", ".xhtml")
    assert text_of("") == "" and text_of("  \n") == "" and text_of("<!-- only -->") == ""


# --- hostile pages ----------------------------------------------------------------------


def test_a_nesting_bomb_is_refused_naming_the_depth_limit() -> None:
    for depth in (MAX_DEPTH + 10, 10_000):  # ours, then libxml2's at 256
        for tag in ("div", "span", "blockquote", "ul", "table"):
            bomb = f"<{tag}>" * depth + "deep" + f"</{tag}>" * depth
            with pytest.raises(TooLarge, match=f"over the {MAX_DEPTH}-level limit"):
                text_of(bomb)


def test_sixty_four_levels_of_every_container_stay_bounded() -> None:
    for open_, close in (
        ("<ul><li>x", "</li></ul>"),
        ("<ol><li>x", "</li></ol>"),
        ("<blockquote><p>x</p>", "</blockquote>"),
        ("<table><tr><td>x", "</td></tr></table>"),
        ("<div><p>x</p>", "</div>"),
        ("<dl><dt>t</dt><dd>x", "</dd></dl>"),
    ):
        page = (open_ * 64 + "bottom" + close * 64) * 20
        started = time.perf_counter()
        text = text_of(page)
        assert time.perf_counter() - started < 5
        assert "bottom" in text
        assert len(text) < 200 * len(page), open_
        chunks_of(text)


def test_a_million_empty_elements_stay_bounded_in_memory() -> None:
    page = "<html><body>" + "<p></p>" * 500_000 + "<span></span>" * 500_000 + "<p>end</p>"
    tracemalloc.start()
    try:
        text = text_of(page)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text == "end\n"
    assert peak < 3 * len(page) + 32 * 1024 * 1024


def test_more_tags_than_the_element_limit_are_refused_before_parsing() -> None:
    page = "<i>" * (MAX_ELEMENTS + 1)
    with pytest.raises(TooLarge, match=f"{MAX_ELEMENTS + 1:,} tags"):
        text_of(page)


def test_an_element_with_too_many_attributes_is_refused_before_parsing() -> None:
    """libxml2 compares an element's attributes pairwise: 200,000 would take minutes."""
    names = " ".join(f'a{i}=">"' for i in range(200_000))
    started = time.perf_counter()
    with pytest.raises(TooLarge, match=f"{MAX_ATTRIBUTES:,}-attribute limit"):
        text_of(f"<p {names}>x</p>")
    assert time.perf_counter() - started < 5
    image = '<p>a chart: <img src="data:image/png;base64,' + "A" * 1_000_000 + '" alt="p99">'
    assert text_of(image) == "a chart: p99\n"
    lookalikes = (  # markup inside a value, a script or a comment is no element
        '<p title="' + "<a " * 1_000 + '">value</p>'
        "<script>var t = '<p " + " ".join(f"a{i}" for i in range(1_000)) + "';</script>"
        "<!-- <p " + " ".join(f"a{i}" for i in range(1_000)) + "> -->"
        '<p><a href="' + "u" * 5_000 + '">link</a></p>'
    )
    assert text_of(lookalikes) == "value\n\nlink\n"


def test_the_text_cell_and_byte_limits_are_named_when_passed() -> None:
    with pytest.raises(TooLarge, match="1,000 characters"):
        text_of("<p>" + "word " * 400 + "</p>", Limits(max_text_chars=1_000))
    table = "<table>" + ("<tr>" + "<td>x</td>" * 10 + "</tr>") * 11 + "</table>"
    with pytest.raises(TooLarge, match="100-cell limit"):
        text_of(table, Limits(max_cells=100))
    with pytest.raises(TooLarge, match="100-byte limit"):
        text_of("<p>" + "x" * 200 + "</p>", Limits(max_bytes=100))
    with pytest.raises(TooLarge, match="10,000,000-byte limit"):
        text_of("<pre>" + "x" * 10_000_001 + "</pre>")


def test_span_bombs_stay_within_the_table() -> None:
    page = "<table><tr><td colspan=999999 rowspan=999999>x</td></tr><tr><td>y</td></tr></table>"
    text = text_of(page)
    lines = text.splitlines()
    # colspan clipped to 1,000 columns (HTML's own cap), rowspan to the table's rows
    assert len(lines) == 3 and lines[0].count("|") == 1002
    assert lines[0].endswith("| x | x |  |") and lines[2].endswith("| x | x | y |")
    with pytest.raises(TooLarge, match="characters"):
        text_of(page, Limits(max_text_chars=2_000))


def test_entities_are_never_expanded_and_nothing_is_fetched() -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(
            f'<!ENTITY lol{n} "{("&lol" + str(n - 1) + ";") * 10 if n > 1 else "&lol;" * 10}">'
            for n in range(1, 10)
        )
        + "]><html><body><p>&lol9;</p><p>&xxe;</p></body></html>"
    )
    text = text_of(laughs)
    assert "lollol" not in text and len(text) < len(laughs)
    xxe = (
        '<!DOCTYPE p [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        '<p>&xxe;</p><img src="http://127.0.0.1:9/x.png" alt="no fetch">'
    )
    text = text_of(xxe)
    assert "root:" not in text and "no fetch" in text


def test_binary_and_malformed_bytes_are_unreadable() -> None:
    with pytest.raises(Unreadable, match="NUL"):
        text_of(b"<p>a\x00b</p>")
    with pytest.raises(Unreadable):
        text_of(bytes(range(256)) * 4)
    with pytest.raises(Unreadable):
        text_of(b"\xff\xfe<\x00p\x00>\x00" + b"\x00\xd8" * 3)  # UTF-16 mark, broken pairs


# --- properties -------------------------------------------------------------------------

_CHARS = st.sampled_from([*"ab é#>-*+1.)|`~=_<[]\\:\t\n", "&amp;", "&lt;", "&nbsp;"])
_WORDS = st.lists(_CHARS, max_size=24).map("".join)


def _inline() -> st.SearchStrategy[str]:
    plain = _WORDS
    marked = st.tuples(st.sampled_from(["b", "i", "code", "a", "span"]), _WORDS).map(
        lambda t: f"<{t[0]}>{t[1]}</{t[0]}>"
    )
    return st.lists(st.one_of(plain, marked, st.just("<br>")), max_size=4).map("".join)


def _blocks() -> st.SearchStrategy[str]:
    leaf = st.one_of(
        _inline().map(lambda s: f"<p>{s} zzpara</p>"),
        st.tuples(st.integers(1, 6), _inline()).map(lambda t: f"<h{t[0]}>zzhead {t[1]}</h{t[0]}>"),
        _WORDS.map(lambda s: f"<pre>{s}</pre>"),
        st.lists(st.lists(_inline(), min_size=1, max_size=3), min_size=1, max_size=3).map(
            lambda rows: (
                "<table>"
                + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
                + "</table>"
            )
        ),
    )
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(st.sampled_from(["ul", "ol"]), st.lists(inner, min_size=1, max_size=3)).map(
                lambda t: f"<{t[0]}>" + "".join(f"<li>zzitem {x}</li>" for x in t[1]) + f"</{t[0]}>"
            ),
            st.lists(inner, min_size=1, max_size=3).map(
                lambda xs: "<blockquote>" + "".join(xs) + "</blockquote>"
            ),
            st.lists(inner, min_size=1, max_size=3).map(
                lambda xs: "<div>" + "".join(xs) + "</div>"
            ),
        ),
        max_leaves=12,
    )


PAGES = st.lists(_blocks(), max_size=6).map(
    lambda xs: "<html><body>" + "".join(xs) + "</body></html>"
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PAGES)
def test_same_bytes_same_text_and_chunks_are_faithful(page: str) -> None:
    data = page.encode()
    first = HTML.extract(data, LIMITS).text
    assert HtmlExtractor().extract(data, LIMITS).text == first
    chunks = chunks_of(first)
    for chunk in chunks:
        if chunk.heading_path:  # page text never becomes a heading
            assert all("zzpara" not in title for title in chunk.heading_path)
        if chunk.kind is ChunkKind.STEP:  # nor a step
            assert chunk.text.split("\n", 1)[0].split(" ", 1)[1].startswith("zzitem")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2_000))
def test_any_bytes_give_text_or_a_refusal(data: bytes) -> None:
    try:
        text = HTML.extract(data, LIMITS).text
    except (Unreadable, TooLarge):
        return
    assert HTML.extract(data, LIMITS).text == text
    chunks_of(text)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(wiki_page().encode())))
def test_a_truncated_page_gives_text_or_unreadable(cut: int) -> None:
    data = wiki_page().encode()[:cut]
    try:
        text = HTML.extract(data, LIMITS).text
    except Unreadable:  # a cut through a multi-byte character
        return
    chunks_of(text)
