"""The hostile inputs of bench/hostile.py that are whole files, requests and settings: import
files (lines that never end, hashes, coverage, sizes), tool arguments outside their schema,
request bodies over the limit (declared or chunked, of any content type), tokens for a server
beyond loopback, and (with --ocr, where the OCR extra is installed) scans of blank pages read
within the file's OCR time budget. Each input's outcome is named as `_measure` counts them:
a refusal by its code, "uncoded ..." for anything else that ends it."""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HEADER = {"format": "pocketmcp-export", "version": 1, "model_id": "m", "dim": 4}
VECTOR = "zczMPc3MTD6amZk+zczMPg=="  # [0.1, 0.2, 0.3, 0.4] as float32, little-endian, base64
MAX_BYTES = 2**20  # MAX_FILE_MB of these probes: 1 MiB


# -- import files -----------------------------------------------------------------------------

def _doc(content: str, **changes: Any) -> dict[str, Any]:
    from pocketmcp.ops.archive_check import chunk_digest

    doc: dict[str, Any] = {
        "type": "document", "external_id": "raw-1", "source": "raw", "uri": None,
        "title": "A", "library": "default", "metadata": {}, "properties": {}, "tags": [],
        "created": None, "modified": None, "links": [], "content": content,
        "sha256": "0" * 64, "size_bytes": None, "mtime_ns": None,
        "chunks": [{"idx": 0, "start": 0, "end": len(content), "tokens": 1, "section": "",
                    "sha256": chunk_digest(content, ""), "vector": VECTOR}]}
    doc.update(changes)
    return doc


def import_files(rng: random.Random, each: int, folder: Path) -> list[Path]:
    """`each` export files, most with one hostile document line; /dev/zero first."""
    out = [Path("/dev/zero")]
    makers = ["good", "zz", "chunk_hash", "uncovered", "oversize", "size_bytes",
              "endless", "too_many_chunks"]
    for n in range(each - 1):
        kind = makers[n % len(makers)]
        text = " ".join(rng.choice(["otter", "heron", "lichen", "basalt"])
                        for _ in range(rng.randrange(2, 40)))
        doc = _doc(text)
        tail = ""
        if kind == "zz":
            doc["sha256"] = rng.choice(["zz", "", "0" * 63, "G" * 64])
        elif kind == "chunk_hash":
            doc["chunks"][0]["sha256"] = rng.choice(["0" * 64, "zz"])
        elif kind == "uncovered":
            doc = _doc(text + " more" * rng.randrange(1, 100_000))
            doc["chunks"] = _doc(text)["chunks"]
        elif kind == "oversize":
            doc = _doc("x" * (MAX_BYTES + rng.randrange(1, 4 * MAX_BYTES)))
        elif kind == "size_bytes":
            doc["size_bytes"] = MAX_BYTES + rng.randrange(1, 2**40)
        elif kind == "too_many_chunks":
            doc["chunks"] = doc["chunks"] * 1001
        path = folder / f"{n}-{kind}.jsonl"
        with open(path, "w") as handle:
            handle.write(json.dumps(HEADER) + "\n")
            if kind == "endless":  # a document line that never ends
                handle.write('{"type": "document", "content": "' + "a" * (8 * MAX_BYTES))
                out.append(path)
                continue
            handle.write(json.dumps(doc) + "\n" + tail)
            handle.write(json.dumps({"type": "end", "documents": 1,
                                     "chunks": len(doc["chunks"])}) + "\n")
        out.append(path)
    return out


def read_import(path: Path) -> str:
    from pocketmcp.core.identity import Identity
    from pocketmcp.errors import PocketError
    from pocketmcp.ops import archive

    try:
        archive._read(path, Identity(model="m", dim=4), (), (MAX_BYTES, 1000))
    except PocketError as exc:
        return f"refused ({exc.code})"
    return "accepted"


# -- tool arguments ---------------------------------------------------------------------------

def tool_arguments(rng: random.Random, each: int) -> list[dict[str, Any]]:
    values: dict[str, list[Any]] = {
        "query": ["", "x" * 4001, "y" * 100_000, 7, None, ["a"]],
        "top_k": [0, -1, 51, 10**9, 2**70, 1.5, "ten", None],
        "score_threshold": [float("nan"), float("inf"), -0.1, 1.5, "high", 10**400],
        "mode": ["both", "", 3],
        "max_per_doc": [0, -3, 10**12],
        "context": [-1, 10**6, "some"],
    }
    out = []
    for _ in range(each):
        args: dict[str, Any] = {"query": "otters"}
        for field in rng.sample(sorted(values), rng.randrange(1, 3)):
            args[field] = rng.choice(values[field])
        if args.get("query") is None:
            del args["query"]
        out.append(args)
    return out


class ToolCalls:
    """The search tool's schema checks, as the server makes them (no index behind it)."""

    def __init__(self) -> None:
        from pocketmcp.mcp import tools_read
        from pocketmcp.mcp.server import PocketServer

        self.server = PocketServer(name="probe")
        # A runtime stand-in: the schema refuses before a tool reads anything of it.
        tools_read.register(self.server, SimpleNamespace(config=None))  # type: ignore[arg-type]
        self.loop = asyncio.new_event_loop()

    def __call__(self, args: dict[str, Any]) -> str:
        from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

        try:
            self.loop.run_until_complete(self.server.call_tool("search", args))
        except UnexpectedToolError:
            return "accepted by the schema"
        except ToolError as exc:
            text = str(exc)
            if text.startswith("INVALID_REQUEST: ") and "pydantic" not in text:
                return "refused (INVALID_REQUEST, field and limit)"
            return "uncoded ToolError"
        return "accepted by the schema"


# -- request bodies ---------------------------------------------------------------------------

def bodies(rng: random.Random, each: int) -> list[tuple[bytes, int, bool]]:
    """(content type, bytes, chunked or declared) of POSTs to /mcp."""
    from pocketmcp.mcp.http import MAX_BODY_BYTES

    kinds = [b"application/json", b"text/plain", b"", b"multipart/form-data; boundary=x",
             b"application/octet-stream"]
    return [(rng.choice(kinds), MAX_BODY_BYTES + rng.randrange(1, 2**20), rng.random() < 0.5)
            for _ in range(each)]


def post(case: tuple[bytes, int, bool]) -> str:
    from pocketmcp.mcp.http import Screened

    kind, size, chunked = case
    reached: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(1)

    piece = b"x" * 2**20
    left = [size]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        part = piece[:min(len(piece), left[0])]
        left[0] -= len(part)
        return {"type": "http.request", "body": part, "more_body": left[0] > 0}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"content-type", kind)] if kind else []
    if not chunked:
        headers.append((b"content-length", str(size).encode()))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    asyncio.run(Screened(app, max_bytes=2**26)(scope, receive, send))
    if reached:
        return "uncoded: reached the SDK"
    code = json.loads(sent[1]["body"])["error"]["code"]
    return f"refused ({sent[0]['status']}, JSON-RPC {code})"


# -- tokens -----------------------------------------------------------------------------------

def tokens(rng: random.Random, each: int) -> list[str]:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    out = []
    for _ in range(each):
        length = rng.choice([1, 8, 15, 16, 24, 64])
        kinds = rng.randrange(1, 12)
        letters = rng.sample(alphabet, kinds)
        out.append("".join(rng.choice(letters) for _ in range(length)))
    return out


def take_token(token: str) -> str:
    from pocketmcp.errors import PocketError
    from pocketmcp.mcp.http import check_token

    try:
        check_token(token, "0.0.0.0")
    except PocketError as exc:
        return f"refused ({exc.code})"
    return "accepted"


# -- OCR of blank scans -----------------------------------------------------------------------

def blank_scans(pages: int, budget_s: float) -> dict[str, Any]:
    """A PDF of `pages` blank scanned pages through the OCR worker, within `budget_s`: the
    time it took, the characters read and what was left unread."""
    import io

    import anyio
    from fpdf import FPDF
    from PIL import Image

    from pocketmcp.convert.limits import Limits
    from pocketmcp.convert.pool import Converter
    from pocketmcp.core.text import sha256

    white = Image.new("L", (850, 1100), 255)
    doc = FPDF(unit="pt")
    for _ in range(pages):
        doc.add_page(format=(612, 792))
        buffer = io.BytesIO()
        white.save(buffer, "PNG")
        doc.image(buffer, x=0, y=0, w=612, h=792)
    data = bytes(doc.output())

    async def run() -> dict[str, Any]:
        converter = Converter(Limits(ocr_budget_s=budget_s, timeout_s=300))
        try:
            started = time.perf_counter()
            done = await converter.convert("pdf", data, "blank.pdf", sha256(data))
            took = time.perf_counter() - started
        finally:
            await converter.aclose()
        return {"pages": pages, "pdf_bytes": len(data), "budget_s": budget_s,
                "seconds": round(took, 1), "characters_read": len(done.text.strip()),
                "pages_unread": done.unread, "ocr": done.properties.get("ocr", "")}

    with tempfile.TemporaryDirectory():
        return anyio.run(run)
