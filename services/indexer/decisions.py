"""What the indexer does with an event, decided from facts alone.

See docs/design/guarantees.md (#order-guard, #tombstones-win, #same-content-same-chunks)
and docs/design/deletion.md.

Pure functions: the adapter reads the facts inside its transaction (was the event already
claimed, what the document holds now), these functions decide, and the adapter executes the
decision in the same transaction. Nothing here touches a server.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from govindex.core.ports import DocumentState, Outcome


@dataclass(frozen=True)
class Incoming:
    """The facts of a create/update that matter to the decision."""

    sequence: int
    content_hash: str
    parser: str
    parser_version: str
    acl: tuple[str, ...]
    has_chunks: bool
    # False: never a metadata-only re-stamp (fact chunks hold their entries' own ACL and
    # time, which a re-stamp of the document's would overwrite): always a new version.
    restampable: bool = True


@dataclass(frozen=True)
class ChangeDecision:
    """`outcome` is one of duplicate, stale, metadata_updated, indexed.

    `keep_version` names the current version a metadata-only change re-stamps;
    `lost_principals` are principals of the current ACL the new version drops: they lose
    every version, history included (a revocation, docs/design/deletion.md).
    """

    outcome: Outcome
    keep_version: str | None = None
    lost_principals: tuple[str, ...] = ()


def decide_change(claimed: bool, state: DocumentState | None, event: Incoming) -> ChangeDecision:
    """Decide a create/update.

    - not claimed (the consumer already processed this event id): duplicate;
    - sequence ≤ the document's last sequence, a tombstone's included: stale, whatever
      arrives late (the order guard, and tombstones win);
    - the current version has the same content hash and parser: metadata only (ACL,
      validity, source_version re-stamped, chunks kept);
    - otherwise a new version.
    """
    if not claimed:
        return ChangeDecision("duplicate")
    if state is not None and event.sequence <= state.last_sequence:
        return ChangeDecision("stale")
    lost = lost_principals(state.current_principals if state else (), event) if state else ()
    if (
        state is not None
        and state.active
        and state.current_version_id is not None
        and state.current_content_hash == event.content_hash
        and state.current_parser == (event.parser, event.parser_version)
        and event.restampable
    ):
        return ChangeDecision("metadata_updated", state.current_version_id, lost)
    return ChangeDecision("indexed", None, lost)


def lost_principals(current: Iterable[str], event: Incoming) -> tuple[str, ...]:
    """Principals who could see the current version and cannot see the new one.

    A version without chunks has no ACL of its own to compare with: nobody loses anything.
    """
    if not event.has_chunks:
        return ()
    return tuple(sorted(set(current) - set(event.acl)))


def decide_deletion(claimed: bool, state: DocumentState | None, sequence: int) -> Outcome:
    """Decide a delete: duplicate, stale (a newer event got there first) or tombstoned.

    A tombstone is recorded even for a document the index never held, so that a create
    delayed behind its own delete can never apply (tombstones win).
    """
    if not claimed:
        return "duplicate"
    if state is not None and sequence <= state.last_sequence:
        return "stale"
    return "tombstoned"


Prediction = Literal["apply", "duplicate", "stale", "behind_tombstone"]


def predict(claimed: bool, last_sequence: int | None, active: bool, sequence: int) -> Prediction:
    """What a decision will be, from the same facts read without locks (a replay's dry run).

    The guard of `decide_change` and `decide_deletion`, with `stale` split in two: behind
    a tombstone (the document is deleted: the event can never bring it back) or behind a
    newer version. `apply` is indexed, metadata_updated or tombstoned.
    """
    if not claimed:
        return "duplicate"
    if last_sequence is not None and sequence <= last_sequence:
        return "stale" if active else "behind_tombstone"
    return "apply"


@dataclass
class Overlay:
    """What the events a replay already predicted will have done by the time a later one
    arrives: the ids they claimed and the documents' sequences they moved. A prediction
    reads Postgres and this, so two copies of one event, or an update and then its delete
    in one range, are foreseen as the consumer will decide them one after the other."""

    claimed: set[str] = field(default_factory=set)
    docs: dict[str, tuple[int, bool]] = field(default_factory=dict)  # key: (sequence, active)

    def predict(
        self,
        event_id: str,
        key: str,
        sequence: int,
        *,
        deletion: bool,
        processed: bool,
        state: DocumentState | None,
    ) -> Prediction:
        claimed = not processed and event_id not in self.claimed
        last, active = self.docs.get(key) or (
            (state.last_sequence, state.active) if state else (None, True)
        )
        outcome = predict(claimed, last, active, sequence)
        if claimed:
            self.claimed.add(event_id)
        if outcome == "apply":
            self.docs[key] = (sequence, not deletion)
        return outcome

    def dump(self) -> dict[str, object]:
        return {"claimed": sorted(self.claimed), "docs": {k: list(v) for k, v in self.docs.items()}}

    @classmethod
    def load(cls, data: dict[str, object]) -> Overlay:
        claimed = data.get("claimed") or []
        docs = data.get("docs") or {}
        assert isinstance(claimed, list) and isinstance(docs, dict)
        return cls(set(claimed), {k: (int(v[0]), bool(v[1])) for k, v in docs.items()})
