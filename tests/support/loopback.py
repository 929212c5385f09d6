"""What every fake platform endpoint of the tests shares: a threaded ``http.server`` on
127.0.0.1 (a free port), started and stopped as a context manager, and JSON replies."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Mapping, Optional


class LoopbackServer:
    """Base class: ``super().__init__(HandlerClass)`` once the fake's state exists."""

    poll_interval = 0.05  # how long shutdown may wait for the serving loop

    def __init__(self, handler: type):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": self.poll_interval}, daemon=True)

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers JSON with ``send_json``."""

    def log_message(self, *args) -> None:
        pass

    def send_json(self, code: int, body, headers: Optional[Mapping[str, str]] = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
