"""The web page's routes: search, a document, the documents list and the live status.

Server-rendered HTML from the templates beside this module, over the same ops as the MCP
tools; the only script is static/status.js, which polls /status.json. Access is checked
before any route runs (mcp/http.py's Guard: the session cookie or the bearer token), except
/login, which checks its one-time code itself.
"""

from __future__ import annotations

import mimetypes
from typing import Any, Literal

import anyio
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from pocketmcp import logs
from pocketmcp.core.safe import safe
from pocketmcp.errors import InvalidRequest, NotFound, PocketError
from pocketmcp.ops import documents
from pocketmcp.runtime import Runtime
from pocketmcp.search import run as search
from pocketmcp.search.filters import Scope
from pocketmcp.search.results import SearchFilter
from pocketmcp.web.auth import COOKIE, Logins
from pocketmcp.web.text import highlight, human_bytes, path_breaks, phase_text, when

log = logs.get("pocketmcp.web")

TOP_K = 20
PAGE = 50
# same-origin, not no-referrer: with no-referrer a form's POST carries `Origin: null`, which
# the Guard refuses as cross-site.
NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "same-origin"}
# The paths of the page (the Guard takes the session cookie on these, and only these).
WEB_PATHS = ("/", "/search", "/doc/", "/documents", "/status", "/status.json", "/static/")

_env = Environment(loader=PackageLoader("pocketmcp.web", "templates"),
                   autoescape=select_autoescape(default=True, default_for_string=True))
_env.filters["highlight"] = highlight
_env.filters["bytes"] = human_bytes
_env.filters["when"] = when
_env.filters["path_breaks"] = path_breaks


def is_web_path(path: str) -> bool:
    return path == "/" or any(path.startswith(p) for p in WEB_PATHS[1:])


def page(name: str, code: int = 200, **values: Any) -> HTMLResponse:
    html = _env.get_template(name).render(**values)
    return HTMLResponse(html, status_code=code, headers=NO_STORE)


def signin_needed() -> HTMLResponse:
    """The 401 a browser gets without the session cookie."""
    return page("signin.html", code=401)


def _error(exc: PocketError) -> HTMLResponse:
    status = 404 if isinstance(exc, NotFound) else 400 if isinstance(exc, InvalidRequest) else 503
    return page("error.html", status, error_code=exc.code, message=str(exc))


def _doc_id(request: Request) -> int:
    """The document number in the path: plain ASCII digits within 64 bits; anything else
    names no document (404), whatever it holds."""
    given = str(request.path_params["doc_id"])
    if not (given.isascii() and given.isdigit()) or len(given) > 19:
        raise NotFound("no such document")
    value = int(given)
    if not 1 <= value < 2**63:
        raise NotFound("no such document")
    return value


def routes(rt: Runtime, logins: Logins) -> list[BaseRoute]:
    config = rt.config

    async def login(request: Request) -> Response:
        given = request.query_params.get("code", "")
        session = logins.redeem(given) if given else None
        if session is None:
            return page("signin.html", code=401, spent=bool(given))
        # A page that moves on by itself, not a redirect: after a redirect that began on
        # another site, a SameSite=Strict cookie would not be sent with the next request.
        response = page("login.html")
        response.headers["Referrer-Policy"] = "no-referrer"  # the link's code stays here
        response.set_cookie(COOKIE, session, httponly=True, samesite="strict", path="/")
        return response

    async def login_link(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        return JSONResponse({"url": f"{base}/login?code={logins.issue()}"}, headers=NO_STORE)

    async def home(request: Request) -> Response:
        q = request.query_params
        query = q.get("q", "").strip()
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid"
        if q.get("mode") in search.MODES:
            mode = q["mode"]  # type: ignore[assignment]  # checked just above
        library = q.get("library", "").strip() or None
        path = q.get("path", "").strip() or None
        values: dict[str, Any] = {"query": query, "mode": mode, "modes": search.MODES,
                                  "library": library or "", "path": path or "",
                                  "matches": None, "error": None,
                                  "threshold": search.SCORE_THRESHOLD}
        try:
            listed = await documents.libraries(await rt.read_index(),
                                               config.watched.default_library)
            values["libraries"] = [lib.name for lib in listed.libraries]
            if query:
                flt = SearchFilter.model_validate({"path_glob": path}) if path else None
                scope = Scope.of(flt, library)
                # The search tool's default threshold: no hit that would score as noise
                # (strict: the page says "0 matches" rather than show hits under it).
                found = await search.search(await rt.reading(), query[:4000], top_k=TOP_K,
                                            scope=scope, mode=mode,
                                            score_threshold=search.SCORE_THRESHOLD,
                                            strict_threshold=True, dates=True)
                values["matches"] = safe(found.model_dump())["matches"]
        except PocketError as exc:
            values["error"] = f"{exc.code}: {exc}"
            values.setdefault("libraries", [])
            return page("search.html", 400 if isinstance(exc, InvalidRequest) else 503,
                        **values)
        return page("search.html", **values)

    async def document(request: Request) -> Response:
        try:
            read = await rt.read_index()
            doc = await documents.get_document(read, _doc_id(request))
            parts = await documents.chunks(read, doc.doc_id)
        except PocketError as exc:
            return _error(exc)
        return page("document.html", doc=safe(doc.model_dump()),
                    chunks=safe([c.model_dump() for c in parts]))

    async def original(request: Request) -> Response:
        try:
            read = await rt.read_index()
            doc = await documents.get_document(read, _doc_id(request))
            path = await anyio.to_thread.run_sync(documents.original_file, read, doc)
        except PocketError as exc:
            return _error(exc)
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/json", "text/markdown"):
            kind = "text/plain; charset=utf-8"  # shown, never run as a page of this site
        return FileResponse(path, media_type=kind, content_disposition_type="inline",
                            filename=path.name, headers={
                                **NO_STORE, "Content-Security-Policy": "sandbox",
                                "X-Content-Type-Options": "nosniff"})

    async def confirm_delete(request: Request) -> Response:
        try:
            doc = await documents.get_document(await rt.read_index(), _doc_id(request))
        except PocketError as exc:
            return _error(exc)
        return page("delete.html", doc=safe(doc.model_dump()))

    async def delete(request: Request) -> Response:
        try:
            doc_id = _doc_id(request)
            result = await documents.delete(rt.writing, [doc_id], None)
        except PocketError as exc:
            return _error(exc)
        log.info("web_delete", doc_id=doc_id, chunks=result.deleted_chunks)
        return RedirectResponse(f"/documents?deleted={doc_id}", status_code=303)

    async def listing(request: Request) -> Response:
        q = request.query_params
        sort: Literal["doc_id", "modified", "path"] = "modified"  # newest first
        if q.get("sort") in ("doc_id", "path"):
            sort = q["sort"]  # type: ignore[assignment]  # checked just above
        library = q.get("library", "").strip() or None
        try:
            read = await rt.read_index()
            listed = await documents.libraries(read, config.watched.default_library)
            found = await documents.list_documents(
                rt.read_index, PAGE, q.get("cursor") or None, library=library, sort=sort)
        except PocketError as exc:
            return _error(exc)
        return page("documents.html", sort=sort, library=library or "",
                    libraries=safe(listed.model_dump())["libraries"],
                    documents=safe(found.model_dump())["documents"],
                    next_cursor=found.next_cursor, deleted=q.get("deleted"))

    async def status_data() -> dict[str, Any]:
        state = await rt.status_report()
        progress = await anyio.to_thread.run_sync(rt.progress)
        data: dict[str, Any] = safe({**state.model_dump(), **progress.model_dump()})
        eta = state.vectors_eta_s
        data["vectors_eta"] = "–" if eta is None else (
            "done" if not state.chunks_waiting else f"about {max(1, round(eta / 60))} min")
        data["index_size"] = human_bytes(progress.index_bytes)
        data["queued"] = sum(q["used"] for q in state.queue_depths.values())
        data["phase_text"] = phase_text(state.phase, bool(data.get("watch_dir")))
        if state.sharing is not None:  # flat, for the page's live fields
            data.update({f"sharing_{k}": v for k, v in state.sharing.model_dump().items()})
        return data

    async def status_page(request: Request) -> Response:
        return page("status.html", status=await status_data())

    async def status_json(request: Request) -> Response:
        return JSONResponse(await status_data(), headers=NO_STORE)

    return [
        Route("/", endpoint=home, methods=["GET"]),
        Route("/login", endpoint=login, methods=["GET"]),
        Route("/login/link", endpoint=login_link, methods=["POST"]),
        Route("/doc/{doc_id}", endpoint=document, methods=["GET"]),
        Route("/doc/{doc_id}/file", endpoint=original, methods=["GET"]),
        Route("/doc/{doc_id}/delete", endpoint=confirm_delete, methods=["GET"]),
        Route("/doc/{doc_id}/delete", endpoint=delete, methods=["POST"]),
        Route("/documents", endpoint=listing, methods=["GET"]),
        Route("/status", endpoint=status_page, methods=["GET"]),
        Route("/status.json", endpoint=status_json, methods=["GET"]),
        Mount("/static", app=StaticFiles(packages=[("pocketmcp.web", "static")]),
              name="static"),
    ]
