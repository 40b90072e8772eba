"""A tiny MCP Streamable HTTP server on 127.0.0.1 for the bridge's tests: it answers each
request with a result naming its method, except for a few methods that misbehave on purpose.
Run as `python upstream_stub.py PORT_FILE`; it writes its port there once it listens. With
STUB_TOKEN set, a request without that bearer token is refused (401), as the real server does.

- `reset`: the connection is reset, no answer.
- `slow`: answered after 1 s.
- `expire`: the session is forgotten and the request answered 404 `Session not found` (the
  SDK's answer, a JSON-RPC error with a null id); so is any later request on that session.
- `bad`: a 400 with a JSON-RPC error with a null id.
- `lines`: an SSE event whose data is two lines of plain text.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
sessions: set[str] = set()
opened: list[str] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/json",
              session: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if session is not None:
            self.send_header("mcp-session-id", session)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, text: str) -> None:
        self._send(status, json.dumps({"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": text}}).encode())

    def _refused(self) -> bool:
        token = os.environ.get("STUB_TOKEN")
        if token is None or self.headers.get("Authorization") == f"Bearer {token}":
            return False
        self._error(401, "a bearer token is needed")
        return True

    def do_GET(self) -> None:
        if self._refused():
            return
        if self.path == "/tools":
            self._send(200, b"[]")
        elif self.path == "/status.json":
            self._send(200, json.dumps({"sharing": {
                "clients": 2, "model_state": "loaded", "memory_mib": 123}}).encode())
        elif self.path == "/opened":
            with lock:
                self._send(200, json.dumps(opened).encode())
        else:
            self._send(405, b"")

    def do_DELETE(self) -> None:
        self._send(200, b"")

    def do_POST(self) -> None:
        if self._refused():
            return
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method = message.get("method")
        session = self.headers.get("mcp-session-id")
        if method == "initialize":
            with lock:
                session = f"s{len(opened) + 1}"
                opened.append(session)
                sessions.add(session)
            self._send(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": {},
                "serverInfo": {"name": "stub", "version": "0"}}}).encode(), session=session)
            return
        with lock:
            known = session in sessions
            if method == "expire":
                sessions.discard(session)
        if not known or method == "expire":
            self._error(404, "Session not found")
            return
        if "id" not in message:
            self._send(202, b"")
        elif method == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        elif method == "bad":
            self._error(400, "Bad Request: no good")
        elif method == "lines":
            self._send(200, b"data: not json\ndata: second line\n\n", "text/event-stream")
        else:
            if method == "slow":
                time.sleep(1.0)
            self._send(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
                "method": method, "session": session}}).encode())


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as out:
        out.write(str(server.server_address[1]))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
