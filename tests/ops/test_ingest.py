"""Documents beyond plain text, end to end through the real server over stdio: converted
formats in the watched folder, hostile files, libraries, ingest_file and ingest_url."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from support import docs
from support.cli import fields
from support.mcp_harness import call, code_of, mcp_session, paths_for, tool_error, until

pytestmark = pytest.mark.usefixtures("processes")

TELESCOPE = [("Collimating the mirror", "Adjust the secondary mirror screws until the "
              "reflection of the primary is centred in the focuser."),
             ("Eyepieces", "A 25 mm eyepiece gives a wide field for star clusters.")]
GARDEN = [("Tomato seedlings", "Harden off tomato seedlings for a week before planting them "
           "in the raised beds."), ("Compost", "Turn the compost heap every fortnight.")]
BREAD = [("Sourdough", "Feed the sourdough starter with rye flour the night before baking."),
         ("Oven", "Bake the loaf in a preheated cast iron pot at 250 degrees.")]

# Hostile files, each contained by a different layer (see pocketmcp/convert.py).
LIMITS = {"CONVERT_TIMEOUT_S": "20",
          **fields(convert={"memory_mb": 512, "max_unpacked": 256 * 2**20})}


def logged(tmp_path: Path, event: str = "skipped") -> dict[str, str]:
    """path -> reason of every `event` line the server logged."""
    out = {}
    for line in (tmp_path / "server.err").read_text(errors="replace").splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("event") == event and "path" in entry:
                out[entry["path"]] = entry.get("reason", "")
    return out


async def test_a_folder_of_mixed_formats_is_searchable_and_hostile_files_are_contained(
        tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    (kb / "papers").mkdir(parents=True)
    (kb / "web").mkdir()
    (kb / "notes.md").write_text("# Bicycle repair\n\nPatch the inner tube and check the "
                                 "tyre for thorns before refitting it.\n")
    (kb / "todo.txt").write_text("Renew the passport at the town hall before the trip.\n")
    docs.pdf(kb / "papers" / "telescope.pdf", "Telescope care", TELESCOPE)
    # Long enough sections that each is a chunk of its own.
    docs.docx(kb / "papers" / "garden.docx", "Garden diary", [(h, " ".join([b] * 12))
                                                            for h, b in GARDEN])
    docs.html(kb / "web" / "bread.html", "Baking bread", BREAD)
    docs.zip_bomb_docx(kb / "papers" / "bomb.docx", 400)
    docs.billion_laughs_docx(kb / "papers" / "laughs.docx")
    docs.pdf_bomb(kb / "papers" / "bomb.pdf", 700)
    docs.deep_html(kb / "web" / "deep.html")
    (kb / "papers" / "fake.pdf").write_bytes(b"this is not a PDF at all")
    (kb / "papers" / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0 legacy word")
    (kb / "papers" / "data.rst").write_bytes(os.urandom(2048) + b"\x00")
    hostile = ["papers/bomb.docx", "papers/laughs.docx", "papers/bomb.pdf", "web/deep.html",
               "papers/fake.pdf", "papers/old.doc"]

    # Everything in the folder is offered to the indexer, known formats or not.
    async with mcp_session(tmp_path, INCLUDE_GLOBS="**/*", **LIMITS) as session:
        # Keywords come first, vectors follow: the searches by meaning below need them all.
        status = await until(lambda: call(session, "status"), lambda s: s[
            "initial_indexing_done"] and s["chunks_waiting"] == 0, seconds=120)
        assert status["documents"] == 5, status
        assert (await paths_for(session, "collimate the telescope mirror"))[0] == \
            "papers/telescope.pdf"
        assert (await paths_for(session, "when to plant tomato seedlings"))[0] == \
            "papers/garden.docx"
        assert (await paths_for(session, "sourdough starter rye"))[0] == "web/bread.html"
        assert (await paths_for(session, "fix a flat bicycle tyre"))[0] == "notes.md"
        assert (await paths_for(session, "passport renewal"))[0] == "todo.txt"

        # Headings of converted documents become section paths; titles come from the file.
        hit = (await call(session, "search", {"query": "tomato seedlings", "top_k": 1}))
        assert hit["matches"][0]["section"] == "Garden diary > Tomato seedlings"
        assert hit["matches"][0]["title"] == "Garden diary"
        assert hit["matches"][0]["library"] == "papers"

        # Libraries by top folder; search within one.
        libraries = {lib["name"]: lib for lib in
                     (await call(session, "list_libraries"))["libraries"]}
        assert {k: v["documents"] for k, v in libraries.items()} == {
            "default": 2, "papers": 2, "web": 1}
        scoped = await call(session, "search", {"query": "sourdough starter rye",
                                                "library": "papers", "top_k": 10,
                                                "score_threshold": 0})
        assert scoped["matches"] and {m["library"] for m in scoped["matches"]} == {"papers"}, scoped
        listed = await call(session, "list_documents", {"library": "web"})
        assert [d["path"] for d in listed["documents"]] == ["web/bread.html"]

        # Each hostile file was skipped with its reason; the server still answers.
        skipped = logged(tmp_path)
        assert set(hostile) <= set(skipped), skipped
        assert "zip bomb" in skipped["papers/bomb.docx"]
        assert "entities" in skipped["papers/laughs.docx"]
        assert "converter stopped" in skipped["papers/bomb.pdf"]
        assert "nested too deeply" in skipped["web/deep.html"]
        assert "unsupported format" in skipped["papers/old.doc"]
        assert "binary content" in skipped["papers/data.rst"]
        assert (await call(session, "status"))["documents"] == 5

        # An edit of a converted file is picked up like any other.
        docs.pdf(kb / "papers" / "telescope.pdf", "Telescope care",
                 [*TELESCOPE, ("Dew", "A dew heater strap keeps the corrector plate clear.")])
        await until(lambda: paths_for(session, "dew heater strap corrector plate", top_k=1),
                    lambda p: p == ["papers/telescope.pdf"], seconds=60)


async def test_ingest_file_scopes_paths_and_reports_status_by_content(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    extra = tmp_path / "extra"
    extra.mkdir()
    (tmp_path / "kb-evil").mkdir()
    (tmp_path / "kb-evil" / "x.md").write_text("sibling prefix trick")
    (tmp_path / "outside.md").write_text("outside the roots")
    (kb / "link.md").symlink_to(tmp_path / "outside.md")
    report = docs.pdf(extra / "report.pdf", "Mission report", TELESCOPE)
    (kb / "watched.md").write_text("# Watched\n\nA note about lighthouse keepers.\n")
    (extra / "legacy.xls").write_bytes(b"\xd0\xcf\x11\xe0")
    (extra / "blob.dat").write_bytes(b"\x00\x01\x02" * 100)

    async with mcp_session(tmp_path, ALLOWED_ROOTS=str(extra)) as session:
        await until(lambda: call(session, "status"), lambda s: s["documents"] == 1)
        args = {"path": str(report), "library": "reports", "metadata": {"project": "apollo"}}
        first = await call(session, "ingest_file", args)
        assert (first["status"], first["library"], first["format"]) == (
            "indexed", "reports", "pdf")
        assert first["chunks"] >= 1 and first["title"] == "Mission report"
        assert (await call(session, "ingest_file", args))["status"] == "skipped"
        docs.pdf(report, "Mission report", [*TELESCOPE, ("Landing", "The lander touched "
                                                         "down in the Sea of Tranquility.")])
        again = await call(session, "ingest_file", args)
        assert (again["status"], again["doc_id"]) == ("replaced", first["doc_id"])

        # Scoping: by library and by metadata, in search and list_documents.
        found = await call(session, "search", {"query": "lander Sea of Tranquility",
                                               "library": "reports"})
        assert found["matches"][0]["doc_id"] == first["doc_id"]
        assert found["matches"][0]["path"] == str(report.resolve())
        none = await call(session, "search", {"query": "lander Sea of Tranquility",
                                              "library": "default"})
        assert all(m["doc_id"] != first["doc_id"] for m in none["matches"])
        by_meta = await call(session, "search", {"query": "lighthouse keepers", "filter": {
            "metadata": {"project": "apollo"}}, "score_threshold": 0})
        assert {m["doc_id"] for m in by_meta["matches"]} == {first["doc_id"]}
        listed = await call(session, "list_documents", {"metadata": {"project": "apollo"}})
        assert [d["doc_id"] for d in listed["documents"]] == [first["doc_id"]]

        # The same file in another library is another document.
        other = await call(session, "ingest_file", {**args, "library": "archive"})
        assert other["status"] == "indexed" and other["doc_id"] != first["doc_id"]
        # A watched file asked for in its own library is the watched document itself.
        watched = await call(session, "ingest_file", {"path": "watched.md"})
        assert (watched["external_id"], watched["status"]) == ("file:watched.md", "skipped")

        # Paths outside the roots, however spelled, and unreadable formats.
        for path in ("../outside.md", str(tmp_path / "outside.md"), "link.md",
                     str(tmp_path / "kb-evil" / "x.md"), f"{kb}/../kb-evil/x.md"):
            error = await tool_error(session, "ingest_file", {"path": path})
            assert code_of(error) == "INVALID_REQUEST" and "outside" in error, error
        assert code_of(await tool_error(session, "ingest_file", {"path": "nope.md"})) == "NOT_FOUND"
        for name in ("legacy.xls", "blob.dat"):
            error = await tool_error(session, "ingest_file", {"path": str(extra / name)})
            assert code_of(error) == "UNSUPPORTED_FORMAT", error
        error = await tool_error(session, "ingest_file", {"path": str(report), "library": ""})
        assert code_of(error) == "INVALID_REQUEST"
        libraries = {lib["name"]: lib["documents"] for lib in
                     (await call(session, "list_libraries"))["libraries"]}
        assert libraries == {"default": 1, "reports": 1, "archive": 1}


class _Site(BaseHTTPRequestHandler):
    pages: ClassVar[dict[str, tuple[str, bytes]]] = {}

    def do_GET(self) -> None:
        if self.path == "/slow":
            time.sleep(3)
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/page.html")
            self.end_headers()
            return
        if self.path not in self.pages:
            self.send_error(404)
            return
        kind, body = self.pages[self.path]
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def site(tmp_path: Path) -> Iterator[str]:
    pdf = docs.pdf(tmp_path / "g.pdf", "Garden diary", GARDEN).read_bytes()
    page = docs.html(tmp_path / "b.html", "Baking bread", BREAD).read_bytes()
    _Site.pages = {"/page.html": ("text/html; charset=utf-8", page),
                   "/diary": ("application/pdf", pdf),
                   "/huge.html": ("text/html", b"<p>" + b"x" * (2 * 2**20) + b"</p>"),
                   "/slow": ("text/html", page),
                   "/image.png": ("image/png", b"\x89PNG\r\n\x1a\n" + bytes(300)),
                   "/clip.mp4": ("video/mp4", b"\x00\x00\x00\x18ftypmp42" + bytes(300))}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_ingest_url_converts_pages_within_limits(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    with site(tmp_path) as base:
        async with mcp_session(tmp_path, MAX_FILE_MB="1",
                               **fields(ingest={"url_timeout_s": 1})) as session:
            page = await call(session, "ingest_url", {"url": f"{base}/page.html",
                                                      "library": "web"})
            assert (page["status"], page["format"], page["title"]) == (
                "indexed", "html", "Baking bread")
            assert (await call(session, "ingest_url", {"url": f"{base}/page.html",
                                                       "library": "web"}))["status"] == "skipped"
            _Site.pages["/page.html"] = ("text/html", _Site.pages["/page.html"][1].replace(
                b"rye flour", b"spelt flour"))
            assert (await call(session, "ingest_url", {"url": f"{base}/page.html",
                                                       "library": "web"}))["status"] == "replaced"
            diary = await call(session, "ingest_url", {"url": f"{base}/diary"})
            assert (diary["format"], diary["library"]) == ("pdf", "default")
            moved = await call(session, "ingest_url", {"url": f"{base}/redirect"})
            assert moved["format"] == "html"

            found = await call(session, "search", {"query": "spelt flour sourdough",
                                                   "library": "web"})
            assert found["matches"][0]["doc_id"] == page["doc_id"]
            text = (await call(session, "get_document", {"doc_id": page["doc_id"]}))["text"]
            assert "Cookie settings" not in text and "boilerplate script" not in text

            cases = {f"{base}/missing": "NOT_FOUND",
                     f"{base}/huge.html": "INVALID_REQUEST",
                     f"{base}/slow": "FETCH_FAILED",
                     f"{base}/image.png": "INVALID_REQUEST",  # read by OCR: not an image
                     f"{base}/clip.mp4": "UNSUPPORTED_FORMAT",
                     "ftp://127.0.0.1/file.txt": "INVALID_REQUEST",
                     "file:///etc/passwd": "INVALID_REQUEST",
                     "http://127.0.0.1:1/closed": "FETCH_FAILED"}
            for url, code in cases.items():
                error = await tool_error(session, "ingest_url", {"url": url})
                assert code_of(error) == code, (url, error)
            assert (await call(session, "status"))["documents"] == 3
