"""moto in server mode on 127.0.0.1 (a free port) with a WSGI layer of the test double's in front
of moto's own app: the doubles of AWS (tests/doubles/aws_double.py) and OBS
(tests/doubles/obs_double.py) share it."""
from __future__ import annotations

from typing import Callable, Tuple

from moto.server import ThreadedMotoServer


def start_moto(middleware: Callable) -> Tuple[ThreadedMotoServer, str]:
    """The started server (``.stop()`` it) and its endpoint ``http://127.0.0.1:PORT``;
    ``middleware(app)`` wraps moto's WSGI app."""

    class Server(ThreadedMotoServer):
        def _server_entry(self):
            from werkzeug.serving import make_server
            from moto.moto_server.werkzeug_app import (DomainDispatcherApplication, MotoRequestHandler,
                                                       create_backend_app)
            app = DomainDispatcherApplication(create_backend_app)
            self._server = make_server(self._ip_address, self._port, middleware(app), True,
                                       request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    server = Server(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


class MotoDouble:
    """Base of a double on moto: ``with Double() as d: d.endpoint``; subclasses give
    ``middleware(app)`` and ``reset()`` (called before the server stops)."""

    _server = None
    endpoint = ""

    def middleware(self, app):
        return app

    def reset(self) -> None:
        pass

    def start(self):
        # moto's backends are global to the process: another test of this worker may have left
        # resources behind, and a double starts empty
        self.reset()
        self._server, self.endpoint = start_moto(self.middleware)
        return self

    def stop(self) -> None:
        self.reset()
        if self._server:
            self._server.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
