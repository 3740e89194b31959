"""Text measures the read service needs: tokens, highlights, near-duplicates (pure)."""

from __future__ import annotations

import re

from govindex.core.tokens import HEURISTIC


def tokens(text: str) -> int:
    """The default estimator's count (govindex.core.tokens.HEURISTIC); a configured
    tokenizer is `Runtime.tokens`."""
    return HEURISTIC.count(text)


_TERM = re.compile(r"[\w][\w.-]*[\w]|\w", re.UNICODE)
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "the",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
    ]
)


def terms(query: str) -> list[str]:
    """The query's words worth highlighting (lowercase, no stop words, unique, in order)."""
    found = [t.lower() for t in _TERM.findall(query)]
    return list(dict.fromkeys(t for t in found if t not in _STOP and len(t) > 1))


def highlights(text: str, query_terms: list[str], limit: int = 32) -> list[tuple[int, int, str]]:
    """Offsets of whole-word occurrences of the terms in `text` (govindex's own, on the
    stored text, so they are exact whatever the index's analyzer does)."""
    found: list[tuple[int, int, str]] = []
    lowered = text.lower()
    for term in query_terms:
        for m in re.finditer(rf"(?<![\w]){re.escape(term)}(?![\w])", lowered):
            found.append((m.start(), m.end(), term))
    found.sort()
    return found[:limit]


_IDENTIFIER = re.compile(
    r"\b[A-Z][A-Z0-9]+-\d+\b"  # PAY-4097
    r"|\b[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+\b"  # KubePodCrashLooping
    r"|\b[\w-]+(?:/[\w.-]+)+\b"  # paths
    r"|\b[\w-]+\.(?:md|markdown|txt|py|ya?ml|json|tf|csv)\b"  # file names
    r"|\b[a-z]+(?:[-_][a-z0-9]+)+\b"  # kebab or snake identifiers: orders-db
)


def identifiers(query: str) -> list[str]:
    """Exact keys a structured lookup should try: identifiers, paths, file names."""
    return list(dict.fromkeys(m.group(0) for m in _IDENTIFIER.finditer(query)))


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & ((1 << 64) - 1)).bit_count()


_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|cannot|can't|don't|doesn't|isn't|aren't|won't|must not|"
    r"without|disabled?|forbidden|prohibited)\b",
    re.IGNORECASE,
)


# Negation markers of Chinese (不 没 未 非), Japanese (ない) and Korean (않). These scripts
# put no spaces between words, so a marker counts wherever it occurs, inside a word too (非常,
# 未来): a word both texts share adds the same marker to both and changes nothing; only a
# marker one text has and the other lacks makes them differ.
_CJK_NEGATION = re.compile("不|没|未|非|ない|않")


def _negations(text: str) -> list[str]:
    """The negations of `text` in order: English words (lowercase), then CJK markers."""
    return [m.lower() for m in _NEGATION.findall(text)] + _CJK_NEGATION.findall(text)


def claims_differ(a: str, b: str) -> bool:
    """Near-duplicates that differ in their numbers or their negations may contradict."""
    return _NUMBER.findall(a) != _NUMBER.findall(b) or _negations(a) != _negations(b)
