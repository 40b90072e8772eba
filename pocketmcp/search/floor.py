"""What a search answers when `score_threshold` removes every match: never a silent empty
list. Unless the caller asked for a strict threshold, the best few matches are kept and the
notice says that they all score under it, how many were removed and the best score, so an
agent can tell "nothing relevant" from "filtered out". Pure functions."""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

# Matches kept, from different documents, when the threshold would remove them all.
FLOOR_KEEP = 3


class Removed(msgspec.Struct):
    """What the threshold removed from one search: (chunk id, score) pairs, best first as
    they came."""

    threshold: float
    under: list[tuple[int, float]] = msgspec.field(default_factory=list)

    def add(self, chunk_id: int, score: float) -> None:
        self.under.append((chunk_id, score))

    def best(self) -> float:
        return max((s for _, s in self.under), default=0.0)


def kept_anyway(removed: Removed, doc_of: dict[int, int], rows: Sequence[int] | set[int],
                most: int = FLOOR_KEEP) -> list[tuple[int, float]]:
    """The best `most` removed matches, one per document, among those still in the index
    (`rows`); best score first."""
    out: list[tuple[int, float]] = []
    docs: set[int] = set()
    for chunk_id, score in sorted(removed.under, key=lambda cs: (-cs[1], cs[0])):
        doc = doc_of.get(chunk_id, -chunk_id)
        if chunk_id not in rows or doc in docs:
            continue
        docs.add(doc)
        out.append((chunk_id, score))
        if len(out) == most:
            break
    return out


_ANYWAY = "shown anyway, under the threshold (strict_threshold: none)"


def notice(removed: Removed, shown: int) -> str:
    """What the reply says when no match reached the threshold."""
    count = len(removed.under)
    best = f"{removed.best():.3f}"
    if not shown:
        return (f"no match reached score_threshold {removed.threshold:g}: {count} removed, "
                f"best score {best}")
    which = "the best match is" if shown == 1 else f"the best {shown} matches are"
    return (f"no match reached score_threshold {removed.threshold:g}: {count} removed "
            f"(best score {best}); {which} {_ANYWAY}")


# The notice above, in either form, within a joined notice.
_OWN = re.compile(r"no match reached score_threshold \S+: \d+ removed(?:, best score \S+| "
                  r"\(best score \S+\); the best (?:match is|\d+ matches are) "
                  + re.escape(_ANYWAY) + ")")


def others(said: str | None) -> str | None:
    """A reply's notice without the floor's own part (None when it says nothing else): for
    a caller that says in its own words why no match passed."""
    if not said:
        return None
    return joined(*(part.strip("; ") for part in _OWN.split(said)))


def joined(*notices: str | None) -> str | None:
    """Several notices as one (None when there are none)."""
    found = [n for n in notices if n]
    return "; ".join(found) if found else None
