"""A real OpenAI-compatible chat/completions endpoint on 127.0.0.1, answered by a Python function (stdlib only)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OpenAIServer:
    """``answer(messages) -> str`` writes each completion. The first ``fail_first`` requests get HTTP 503 and
    requests whose last message contains ``slow_marker`` are answered after ``slow_s`` seconds (to test
    retries and timeouts). Every request body is kept in :attr:`requests`."""

    def __init__(
        self,
        answer: Callable[[list[dict]], str],
        fail_first: int = 0,
        slow_marker: str | None = None,
        slow_s: float = 0.0,
    ):
        self.answer, self.fail_first, self.slow_marker, self.slow_s = answer, fail_first, slow_marker, slow_s
        self.requests: list[dict] = []
        self.keys: list[str | None] = []  # the Authorization header of each request
        self.failed = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server API; the model list, as vLLM serves it
                if self.path != "/v1/models":
                    return self._send(404, {"error": f"no route {self.path}"})
                return self._send(200, {"object": "list", "data": [{"id": "served-model", "object": "model"}]})

            def do_POST(self):  # noqa: N802 - the http.server API
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": f"no route {self.path}"})
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    server.keys.append(self.headers.get("Authorization"))
                    fail = server.failed < server.fail_first
                    server.failed += fail
                if fail:
                    return self._send(503, {"error": "overloaded"})
                if server.slow_marker and server.slow_marker in body["messages"][-1]["content"]:
                    time.sleep(server.slow_s)
                choices = [
                    {"index": i, "message": {"role": "assistant", "content": server.answer(body["messages"])}}
                    for i in range(body.get("n", 1))
                ]
                return self._send(200, {"object": "chat.completion", "model": body["model"], "choices": choices})

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            def log_message(self, *args):  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
