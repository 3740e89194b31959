"""Chunking throughput: govindex's Markdown parser against LangChain's splitters, one run.

Prints MB/s for each and the ratios, plus how time grows when a heading-dense document
doubles (a quadratic path would show ~4x). Not a test: run it with `make bench`.

`--baseline MODULE` also times another copy of the parser (any importable module with a
`MarkdownParser`, e.g. a copy of an older version outside the repository, found through
PYTHONPATH) in the same run, and prints our ratio to it: on a shared machine a ratio
measured in one run is steadier than MB/s compared across runs. `--profile` prints where
the parser's time goes on the same corpus (cProfile, by own time) and stops.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import pstats
import random
import statistics
import time
from collections.abc import Callable

import pyromark
from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

from corpora import heading_dense, runbook
from indexer.parsers.markdown import OPTIONS, MarkdownParser

BUDGET = 2400  # characters per chunk, the same for every splitter


def seconds(fn: Callable[[], object]) -> float:
    """CPU seconds of one call: on a shared machine wall time also counts the other
    processes' turns; the parsers are single-threaded, so on an idle one the two agree."""
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def best_seconds(fn: Callable[[], object], repeat: int = 5) -> float:
    return min(seconds(fn) for _ in range(repeat))


def race(contenders: dict[str, Callable[[], object]], rounds: int = 5) -> dict[str, float]:
    """Each contender's best time, timed in turn round after round, so that a busy spell
    of the machine falls on all of them rather than on one."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            times[name].append(seconds(fn))
    return {name: min(t) for name, t in times.items()}


def profile(parse: Callable[[str], object], docs: list[str], top: int = 20) -> None:
    for d in docs:  # warm: caches, imports
        parse(d)
    profiler = cProfile.Profile()
    profiler.enable()
    for d in docs:
        parse(d)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    args.add_argument("--baseline", metavar="MODULE", help="also time MODULE.MarkdownParser")
    args.add_argument("--profile", action="store_true", help="profile the parser and stop")
    options = args.parse_args()
    rng = random.Random(7)
    docs = [runbook(i, rng) for i in range(1500)]
    megabytes = sum(len(d.encode()) for d in docs) / 1e6
    ours = MarkdownParser()
    if options.profile:
        profile(ours.parse, docs)
        return
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
    if options.baseline:
        baseline = importlib.import_module(options.baseline).MarkdownParser()
        contenders[f"baseline {options.baseline}"] = baseline.parse
    print(f"corpus: {len(docs)} runbooks, {megabytes:.2f} MB, budget {BUDGET} chars\n")
    best = race(
        {name: lambda split=split: [split(d) for d in docs] for name, split in contenders.items()}
    )
    speed = {name: megabytes / best[name] for name in contenders}
    for name in contenders:
        print(f"  {name:<42} {speed[name]:8.2f} MB/s")
    base = speed["govindex markdown parser"]
    print()
    for name in list(contenders)[1:3]:
        print(f"  govindex / {name.split()[1]:<32} {base / speed[name]:6.2f}x")
    if options.baseline:
        then = speed[f"baseline {options.baseline}"]
        print(f"  govindex / baseline {options.baseline:<23} {base / then:6.2f}x")
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
