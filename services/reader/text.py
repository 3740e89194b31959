"""Text measures the read service needs: tokens, highlights, near-duplicates (pure)."""

from __future__ import annotations

import math
import re

# Scripts where one character is about one token or more for BPE tokenizers (CJK
# ideographs, kana, hangul, and the fullwidth forms): counting them at chars/4 undercounts
# by three to four times, so each counts as one token.
_DENSE_SCRIPT = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3200-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00020000-\U0003ffff]"
)


def tokens(text: str) -> int:
    """A token estimate that never undercounts much: chars/4 for alphabetic scripts, one
    per character for CJK, kana and hangul."""
    dense = len(_DENSE_SCRIPT.findall(text))
    return max(1, dense + math.ceil((len(text) - dense) / 4))


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


def claims_differ(a: str, b: str) -> bool:
    """Near-duplicates that differ in their numbers or their negations may contradict."""
    if _NUMBER.findall(a) != _NUMBER.findall(b):
        return True
    return [m.lower() for m in _NEGATION.findall(a)] != [m.lower() for m in _NEGATION.findall(b)]
