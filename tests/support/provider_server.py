"""An embedding provider on 127.0.0.1 for tests: vectors from the embedder it is given (the
built-in model, or the fake one), over OpenAI's POST /v1/embeddings and Ollama's POST
/api/embed, with faults on demand.

Faults are queued (`then(...)`: one per request, in order) or standing (`always`: every
request until cleared). Requests are recorded, with the most that were in flight at once: a
request is in flight from when it is read until its answer starts (once the answer is sent,
its client may send the next one before this server's thread gets the CPU back).
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

Embed = Callable[[list[str]], np.ndarray]
HANG_MAX_S = 10.0  # a hanging request gives up after this, or when the server stops


@dataclass(frozen=True)
class Fault:
    """What one request gets instead of its vectors."""

    status: int = 0  # an error answer with this status
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # its JSON (default: an OpenAI-shaped error)
    hang: bool = False  # no answer at all until the server stops
    delay_s: float = 0.0  # the answer (with this fault's other effects) this much later
    malformed: bool = False  # 200 with a body that is not JSON
    dim: int = 0  # vectors of this many dimensions


OK = Fault()


@dataclass
class Seen:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]


class _Quiet(ThreadingHTTPServer):
    """Says nothing of a client that went away before its answer (a process killed while
    it waits for its vectors)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ProviderServer:
    def __init__(self, embed: Embed, *, refuse: str | None = None) -> None:
        self.embed = embed
        self.refuse = refuse  # texts holding this are answered 400, as a provider does
        self.queued: deque[Fault] = deque()
        self.always: Fault | None = None
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.answered = 0  # requests answered with vectors
        self.lock = threading.Lock()
        self.release = threading.Event()  # ends hanging requests
        self.httpd = _Quiet(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        # Its stop waits for the next look at the socket: every 20 ms, not the default 0.5 s.
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                        daemon=True, name="test.provider")

    def then(self, *faults: Fault) -> ProviderServer:
        self.queued.extend(faults)
        return self

    def requests(self, path: str | None = None) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if path is None or s.path == path]

    def inputs(self) -> list[str]:
        """Every text sent, in order."""
        return [t for s in self.requests() for t in s.body.get("input", [])]

    def start(self) -> ProviderServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    def _next_fault(self) -> Fault:
        with self.lock:
            if self.queued:
                return self.queued.popleft()
            return self.always or OK

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            flying = False  # this request counts in `in_flight`

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                body = json.loads(raw or b"{}")
                with server.lock:
                    server.seen.append(Seen(self.path, body, dict(self.headers.items())))
                    server.in_flight += 1
                    server.most_in_flight = max(server.most_in_flight, server.in_flight)
                self.flying = True
                try:
                    self._answer(body, server._next_fault())
                finally:
                    self._landed()

            def _landed(self) -> None:
                """The request is no longer in flight (once, before its answer starts)."""
                if self.flying:
                    self.flying = False
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self, body: dict[str, Any], fault: Fault) -> None:
                path = self.path.split("?", 1)[0]
                ollama = path == "/api/embed"
                if path not in ("/v1/embeddings", "/api/embed"):
                    return self._json(404, {"error": {"message": "unknown route"}})
                if fault.hang:
                    server.release.wait(HANG_MAX_S)
                    self.close_connection = True
                    return None
                if fault.delay_s:
                    server.release.wait(fault.delay_s)
                if fault.malformed:
                    return self._raw(200, b'{"data": [{"embedding": [0.1, 0.2')
                if fault.status:
                    payload = fault.body if fault.body is not None else {
                        "error": {"message": f"injected {fault.status}", "type": "test",
                                  "code": None}}
                    return self._json(fault.status, payload, fault.headers)
                texts = body.get("input")
                texts = [texts] if isinstance(texts, str) else texts
                if server.refuse and any(server.refuse in t for t in texts):
                    return self._json(400, {"error": {
                        "message": "this input is not accepted", "type": "invalid_request_error",
                        "code": None}})
                vectors = server.embed(list(texts)).astype(np.float32)
                if fault.dim:
                    vectors = vectors[:, :fault.dim]
                with server.lock:
                    server.answered += 1
                tokens = sum(len(t.split()) for t in texts)
                if ollama:
                    return self._json(200, {"model": body.get("model"),
                                            "embeddings": vectors.tolist(),
                                            "prompt_eval_count": tokens})
                b64 = body.get("encoding_format") == "base64"
                data = [{"object": "embedding", "index": i,
                         "embedding": base64.b64encode(v.tobytes()).decode() if b64
                         else v.tolist()} for i, v in enumerate(vectors)]
                data.reverse()  # `index` gives the order, not the position
                return self._json(200, {"object": "list", "data": data,
                                        "model": body.get("model"),
                                        "usage": {"prompt_tokens": tokens,
                                                  "total_tokens": tokens}})

            def _json(self, status: int, payload: Any,
                      headers: dict[str, str] | None = None) -> None:
                self._raw(status, json.dumps(payload).encode(), headers)

            def _raw(self, status: int, data: bytes,
                     headers: dict[str, str] | None = None) -> None:
                self._landed()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        return Handler


@contextmanager
def provider_server(embed: Embed, **kw: Any) -> Iterator[ProviderServer]:
    server = ProviderServer(embed, **kw).start()
    try:
        yield server
    finally:
        server.stop()
