"""The conversion worker: a separate process that turns documents into Markdown.

Run by `convert.pool.Converter` as `python -m pocketmcp.convert.worker MEMORY_MB IDLE_S
[NICE]`.
It caps its own address space, refuses XML entity tricks, and answers one framed request at a
time on stdin/stdout. It exits after IDLE_S seconds without work, on EOF, and after running
out of memory (its heap may be left fragmented). Whatever a parser does here, the server
process only sees an error reply, a dead pipe or a timeout.
"""

from __future__ import annotations

import os
import re
import select
import struct
import sys
from typing import BinaryIO

import defusedxml
import msgspec
from defusedxml import DefusedXmlException

from pocketmcp.convert import formats
from pocketmcp.convert.ocr import OcrSpec

HEADER = struct.Struct(">I")


class Request(msgspec.Struct, frozen=True):
    kind: str
    data: bytes
    max_chars: int
    max_unpacked: int
    ocr: OcrSpec | None = None


class Reply(msgspec.Struct, frozen=True):
    ok: bool
    text: str = ""
    title: str | None = None
    pages: int | None = None
    properties: dict[str, str] = {}
    scanned: tuple[int, ...] = ()
    scanned_total: int = 0
    unread: int = 0
    error: str = ""
    fatal: bool = False  # the worker exits after this reply


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    parts, left = [], size
    while left:
        part = stream.read(left)
        if not part:
            return None
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _limit_resources(memory_mb: int) -> None:
    try:
        import resource  # optional: POSIX only
    except ImportError:  # not POSIX: only the parent's timeout applies
        return
    limit = memory_mb * 2**20
    for name, value in (("RLIMIT_AS", limit), ("RLIMIT_CORE", 0)):
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, hard))
        except (ValueError, OSError):
            pass  # e.g. macOS does not enforce RLIMIT_AS; the timeout still holds


_ADDRESS = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def answer(request: Request) -> Reply:
    """The conversion's reply; its error names no object of this process (a parser's message
    such as "cannot identify image file <_io.BytesIO object at 0x...>" says "the file")."""
    reply = _answer(request)
    if reply.error:
        return msgspec.structs.replace(reply, error=_ADDRESS.sub("the file", reply.error))
    return reply


def _answer(request: Request) -> Reply:
    try:
        result = formats.convert(request.kind, request.data,
                                 max_unpacked=request.max_unpacked, ocr=request.ocr)
    except formats.Refused as exc:
        return Reply(ok=False, error=str(exc))
    except DefusedXmlException as exc:
        return Reply(ok=False, error=f"refused: the XML declares entities or a DTD "
                                     f"({type(exc).__name__}), as entity-expansion bombs do")
    except MemoryError:
        return Reply(ok=False, fatal=True,
                     error="needs more memory than the converter may use")
    except RecursionError:
        return Reply(ok=False, error="structure nested too deeply to convert")
    except Exception as exc:  # a parser's own error on a malformed file; the file is skipped
        if "bad_alloc" in str(exc):  # onnxruntime (OCR) out of memory
            return Reply(ok=False, fatal=True,
                         error="OCR needs more memory than it may use")
        return Reply(ok=False, error=f"could not be read as {request.kind} "
                                     f"({type(exc).__name__}: {str(exc)[:300]})")
    text = result.text.replace("\x00", "")
    if len(text) > request.max_chars:
        return Reply(ok=False, error=f"converted text is {len(text)} characters, over the "
                                     f"limit of {request.max_chars} (MAX_FILE_MB)")
    return Reply(ok=True, text=text, title=result.title, pages=result.pages,
                 properties=result.properties, scanned=result.scanned,
                 scanned_total=result.scanned_total, unread=result.unread)


def main(argv: list[str]) -> int:
    memory_mb, idle_s = int(argv[0]), float(argv[1])
    _limit_resources(memory_mb)
    defusedxml.defuse_stdlib()  # the stdlib's XML parsers refuse entity declarations
    # Replies go to a private copy of stdout; fd 1 then points at stderr, so a library that
    # prints cannot corrupt the framing.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = os.fdopen(0, "rb", buffering=0)  # unbuffered: select() sees every byte
    encoder, decoder = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Request)
    write_frame(replies, b"")  # started: the parent's time limit covers conversions only
    while True:
        ready, _, _ = select.select([requests], [], [], idle_s)
        if not ready:
            return 0  # idle: free the memory; the parent starts a new worker when needed
        header = _read_exactly(requests, HEADER.size)
        if header is None:
            return 0
        body = _read_exactly(requests, HEADER.unpack(header)[0])
        if body is None:
            return 0
        reply = answer(decoder.decode(body))
        write_frame(replies, encoder.encode(reply))
        if reply.fatal:
            return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
