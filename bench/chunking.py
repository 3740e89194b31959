"""Chunking throughput: govindex's Markdown parser against LangChain's splitters, one run.

Prints MB/s for each and the ratios, plus how time grows when a heading-dense document
doubles (a quadratic path would show ~4x). Not a test: run it with `make bench`.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable

import pyromark
from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

from corpora import heading_dense, runbook
from indexer.parsers.markdown import OPTIONS, MarkdownParser

BUDGET = 2400  # characters per chunk, the same for every splitter


def best_seconds(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rng = random.Random(7)
    docs = [runbook(i, rng) for i in range(1500)]
    megabytes = sum(len(d.encode()) for d in docs) / 1e6
    ours = MarkdownParser()
    recursive = RecursiveCharacterTextSplitter(chunk_size=BUDGET, chunk_overlap=0)
    headers = MarkdownHeaderTextSplitter(
        headers_to_split_on=[("#" * k, f"h{k}") for k in range(1, 7)], strip_headers=False
    )
    contenders: dict[str, Callable[[str], object]] = {
        "govindex markdown parser": ours.parse,
        "langchain RecursiveCharacterTextSplitter": recursive.split_text,
        "langchain MarkdownHeaderTextSplitter": headers.split_text,
        # What the parser stands on: the CommonMark event stream alone, nothing cut.
        "pyromark event stream (floor)": lambda d: sum(
            1 for _ in pyromark.events_with_range(d, options=OPTIONS)
        ),
    }
    print(f"corpus: {len(docs)} runbooks, {megabytes:.2f} MB, budget {BUDGET} chars\n")
    speed = {}
    for name, split in contenders.items():
        seconds = best_seconds(lambda split=split: [split(d) for d in docs])
        speed[name] = megabytes / seconds
        print(f"  {name:<42} {speed[name]:8.2f} MB/s")
    base = speed["govindex markdown parser"]
    print()
    for name in list(contenders)[1:3]:
        print(f"  govindex / {name.split()[1]:<32} {base / speed[name]:6.2f}x")
    print("\nscaling (heading-dense document, time when the document doubles):")
    ratios = []
    for n in (2000, 4000, 8000):
        single = best_seconds(lambda n=n: ours.parse(heading_dense(n)), repeat=3)
        double = best_seconds(lambda n=n: ours.parse(heading_dense(2 * n)), repeat=3)
        ratios.append(double / single)
        print(
            f"  {n:>5} -> {2 * n:>5} headings: {single * 1000:7.1f} ms -> "
            f"{double * 1000:7.1f} ms  ({double / single:.2f}x)"
        )
    print(f"  median doubling ratio {statistics.median(ratios):.2f}x (target <= 2.3x)")
    print(
        f"\ntarget: govindex >= 2x MarkdownHeaderTextSplitter: "
        f"{base / speed['langchain MarkdownHeaderTextSplitter']:.2f}x"
    )


if __name__ == "__main__":
    main()
