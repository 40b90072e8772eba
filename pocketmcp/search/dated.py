"""The dates step: dates said in a query, as a filter on the notes' dates
(`core.query_dates`).

"what did I decide last week" searches for "what did I decide" among the documents whose
`created` date (a note's front matter `created` or `date`, else its last change) lies in last
week, and the reply's notice says how the phrase was taken. When no document of that span
reaches the threshold, a query that asks about something ("Lisbon trip last week") is
answered from every date, with the query as it was said, and the notice says so; a query
that asks for little more than the time ("what did I write yesterday", "notes created last
week": at most one word besides the date, stop words and words asking for notes, `ASKING`)
gets the span's best documents, under the threshold as the notice says. When the span's
answer stands, every document of the span is kept whatever its score (up to top_k): those
reaching the threshold first, then the others, then those no retriever brought
(`rest_of_span`), each with the created date that placed it there. A caller that gave date
filters of its own keeps them, and the query is then left as it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import msgspec

from pocketmcp.core.keywords import terms
from pocketmcp.core.query_dates import Span, understand
from pocketmcp.search.filters import Scope, is_stale
from pocketmcp.search.render import Hit, with_spots
from pocketmcp.store.api import Reader
from pocketmcp.store.filters import DocFilter

VAGUE_WORDS = 1  # content words besides the date, at most, of a query asking for a time
# Words that ask for the notes of a time, not for a subject ("which notes did I create",
# "was habe ich geschrieben"), with the function words English's stop words leave, in each
# language the date reader knows: not counted as content words.
_ASKING = """
    note notes write wrote written writing create created add added change changed edit
    edited modify modified save saved make made file files document documents doc docs page
    pages entry entries
    qu quoi que quel quelle quels quelles est ce ai je mes ma mon les le la de du des un une
    écrit écrits ecrit créé créés cree modifié modifie ajouté ajoute fichier fichiers fait
    entrée entrées
    was welche welcher welches habe hab hat ich mein meine meinen meiner die der das den dem
    von vom notiz notizen geschrieben schrieb erstellt angelegt geändert bearbeitet
    gespeichert hinzugefügt datei dateien dokument dokumente seite seiten eintrag einträge
    gemacht
    qué escribí escribi escrito notas nota mis mi las los el del creé creado modificado
    añadido archivo archivos documento página páginas hice he
    cosa che ho scritto le gli il mie miei mio mia di della dei creato modificato aggiunto
    pagina pagine fatto
    escrevi minhas meus minha meu da do das dos na no criei criado adicionado arquivo
    arquivos fiz
    wat heb ik mijn van het een notities notitie geschreven schreef gemaakt aangemaakt
    gewijzigd bewerkt bestand bestanden documenten paginas
"""
ASKING = frozenset(_ASKING.split())
REST_LOOKED = 4  # documents looked at for each place left to fill (`rest_of_span`)


def today() -> dt.date:
    """The local calendar day: "yesterday" is the user's yesterday."""
    return dt.datetime.now().astimezone().date()


def scoped(span: Span, scope: Scope | None) -> Scope:
    """`scope` narrowed to the documents created within `span`."""
    base = scope or Scope()
    where = msgspec.structs.replace(
        base.where, created_after=span.start.isoformat() if span.start else None,
        created_before=span.end.isoformat() if span.end else None)
    return msgspec.structs.replace(base, where=where)


def span_of(query: str, scope: Scope | None, day: dt.date | None = None) -> Span | None:
    """The span a date phrase of `query` says (None when it says none, or the caller's
    scope has dates of its own)."""
    where = scope.where if scope is not None else DocFilter()
    if any((where.created_after, where.created_before, where.modified_after,
            where.modified_before)):
        return None
    return understand(query, day or today())


def rest_of_span(reader: Reader, scope: Scope, hits: Sequence[Hit], most: int,
                 root: Path | None) -> list[Hit]:
    """Documents of the span that no retriever brought (no word of the query, no vector
    yet), up to `most`, newest first, each by its first chunk with score 0, after the hits
    (blocking). Only the span's latest written documents are looked at (REST_LOOKED per
    place), so a wide span over a large index costs no more than a small one."""
    if most <= 0:
        return []
    have = {h.row.doc_id for h in hits}
    missing = [d for d in scope.doc_ids(reader) or () if d not in have][-most * REST_LOOKED:]
    rows = reader.hits(reader.opening_chunks(missing)) if missing else {}
    found = sorted(rows.values(), key=lambda r: (r.created or "", r.doc_id), reverse=True)
    return with_spots(reader, [Hit(row, 0.0, None, None, stale=is_stale(
        root, row.external_id, row.source, row.size_bytes, row.mtime_ns))
        for row in found[:most]])


def under(hits: Sequence[Hit], threshold: float | None) -> list[Hit]:
    """The hits scoring under `threshold` (none without one)."""
    return [] if threshold is None else [h for h in hits if h.score < threshold]


def asks_for_the_time(span: Span) -> bool:
    """Whether the query asks for little more than the notes of its time: at most
    VAGUE_WORDS words besides the date, its stop words and the words of `ASKING`."""
    return len([t for t in terms(span.query) if t not in ASKING]) <= VAGUE_WORDS


def stands(span: Span, found: bool, under: bool) -> bool:
    """Whether the span's own answer stands: it `found` matches that reach the threshold,
    or (all `under` it) the query asks for little more than the time."""
    return found and (not under or asks_for_the_time(span))


def said(span: Span, stood: bool, under: int = 0, threshold: float | None = None, *,
         best: float = 0.0) -> str:
    """What the notice says of the span: how it was taken; when its answer stood with
    documents `under` the threshold, that they are kept as documents of that time; when it
    did not stand, that the matches are from any date."""
    taken = f"dates: {span.describe()} (the documents' created date)"
    if not stood:
        return (f"{taken}; no document of that time matched, so these are from any date")
    if not under or threshold is None:
        return taken
    if best < threshold:
        return (f"{taken}; no match reached score_threshold {threshold:g} (best score "
                f"{best:.3f}): the documents of that time are shown anyway, best first")
    return (f"{taken}; {under} of the documents of that time score under score_threshold "
            f"{threshold:g}, kept after the others as the query named their time")
