"""Generated corpora the benchmarks share: realistic runbooks, heading-dense text."""

from __future__ import annotations

import random


def runbook(i: int, rng: random.Random) -> str:
    steps = "\n".join(
        f"{n}. {rng.choice(VERBS)} the {rng.choice(NOUNS)} on host-{i}-{n}."
        for n in range(1, rng.randint(3, 9))
    )
    para = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 160)))
    rows = "\n".join(f"| svc-{i}-{r} | team-{r % 5} | {rng.randint(1, 99)} |" for r in range(6))
    return (
        f"# Runbook {i}: {rng.choice(NOUNS)} recovery\n\n{para}\n\n## Prerequisites\n\n"
        f"- Access to the {rng.choice(NOUNS)} console.\n\n## Steps\n\n{steps}\n\n"
        f"## Inventory\n\n| service | owner | weight |\n|---|---|---|\n{rows}\n\n"
        f"## Validation\n\n{para[:300]}\n\n```sh\n# not a heading\ncheck --all\n```\n\n"
        f"## Rollback\n\n{para[:200]}\n\n"
    )


def heading_dense(n: int) -> str:
    return "".join(f"{'#' * (1 + k % 4)} Heading {k}\n\nShort text {k}.\n\n" for k in range(n))


VERBS = ["Restart", "Drain", "Promote", "Freeze", "Check", "Rotate", "Scale"]
NOUNS = ["database", "cache", "queue", "gateway", "replica", "scheduler", "index"]
WORDS = [
    *["the", "service", "owner", "must", "confirm", "that", "every", "replica", "reports"],
    *["healthy", "before", "the", "traffic", "is", "shifted", "back", "and", "the"],
    *["incident", "channel", "is", "told"],
]
