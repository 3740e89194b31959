"""Entities and relations from frontmatter: deterministic, no model calls.

Stable business ids are the keys (`service:orders-db`, `team:data`, `document:src/path`);
names as written are kept as aliases. Rules:

- `service:` on a runbook → runbook GOVERNS service; on a policy → policy APPLIES_TO
  service; on an incident → incident AFFECTED service; otherwise document ABOUT service.
- `owner:` with `service:` → service OWNED_BY team; without → document OWNED_BY team.
- `applies_to:` → document APPLIES_TO service (each).
- `supersedes:` → document SUPERSEDES document (ids in the same source).
- `depends_on:` with `service:` → service DEPENDS_ON service (each); without → document
  DEPENDS_ON service.
- `deployed_as:` with `service:` → service DEPLOYED_AS deployment (each id); without →
  document ABOUT deployment.
- `alerts:` with `service:` → service FIRES alert; without → document ABOUT alert, so an
  alert reaches its service, the service's owner and its runbook in two hops.

The document kind comes from frontmatter `type:` or from the path (runbooks/, policies/,
incidents/). Names are type-checked frontmatter (`Frontmatter`): short one-line strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from govindex.core.records import slugify
from indexer.frontmatter import Frontmatter, FrontmatterLike


@dataclass(frozen=True)
class Edge:
    subject: str
    relation: str
    object: str
    subject_alias: str
    object_alias: str


_SPACE = re.compile(r"\s+")


def entity(kind: str, name: str) -> str:
    """A stable business id: kind plus the slug of the name (aliases keep the spelling)."""
    key = slugify(name) or _SPACE.sub("-", name.strip().lower())
    return f"{kind}:{key}"


def document_kind(doc_id: str, frontmatter: FrontmatterLike) -> str:
    declared = Frontmatter.of(frontmatter).type
    if declared and declared.strip():
        return declared.strip().lower()
    path = doc_id.lower()
    for folder, kind in (
        ("runbook", "runbook"),
        ("polic", "policy"),
        ("incident", "incident"),
        ("postmortem", "incident"),
    ):
        if folder in path:
            return kind
    return "document"


def _names(values: tuple[str, ...]) -> list[str]:
    return [v for v in values if v.strip()]


def extract_edges(source_id: str, doc_id: str, frontmatter: FrontmatterLike) -> list[Edge]:
    """Edges from type-checked frontmatter (InvalidFrontmatter for a field that is not)."""
    fm = Frontmatter.of(frontmatter)
    doc = f"document:{source_id}/{doc_id}"
    kind = document_kind(doc_id, fm)
    relation = {"runbook": "GOVERNS", "policy": "APPLIES_TO", "incident": "AFFECTED"}.get(
        kind, "ABOUT"
    )
    edges: list[Edge] = []
    services = _names(fm.service) + _names(fm.services)
    for name in services:
        edges.append(Edge(doc, relation, entity("service", name), doc_id, name))
    for name in _names(fm.applies_to):
        edges.append(Edge(doc, "APPLIES_TO", entity("service", name), doc_id, name))
    for owner in _names(fm.owner):
        if services:
            edges += [
                Edge(entity("service", s), "OWNED_BY", entity("team", owner), s, owner)
                for s in services
            ]
        else:
            edges.append(Edge(doc, "OWNED_BY", entity("team", owner), doc_id, owner))
    for alert in _names(fm.alerts):
        if services:
            edges += [
                Edge(entity("service", s), "FIRES", entity("alert", alert), s, alert)
                for s in services
            ]
        else:
            edges.append(Edge(doc, "ABOUT", entity("alert", alert), doc_id, alert))
    for target in _names(fm.depends_on):
        edges += [
            Edge(entity("service", s), "DEPENDS_ON", entity("service", target), s, target)
            for s in services
        ] or [Edge(doc, "DEPENDS_ON", entity("service", target), doc_id, target)]
    for deployment in _names(fm.deployed_as):
        edges += [
            Edge(
                entity("service", s), "DEPLOYED_AS", entity("deployment", deployment), s, deployment
            )
            for s in services
        ] or [Edge(doc, "ABOUT", entity("deployment", deployment), doc_id, deployment)]
    for older in _names(fm.supersedes):
        edges.append(Edge(doc, "SUPERSEDES", f"document:{source_id}/{older}", doc_id, older))
    return list(dict.fromkeys(edges))
