"""``cloudtrain ui``: every job on every provider in one web page, on 127.0.0.1 only.

``serve(port, open_browser)`` binds 127.0.0.1 (port 0: any free one), prints the URL with a new
random token (as Jupyter does) and serves until Ctrl-C.  The app (``app.py``) answers only
requests that carry the token; what it shows comes from ``data.py`` (the ledger, the catalogs
and the providers' logs/cancel/outputs calls); the page (``static/``) is plain HTML, CSS and
JavaScript shipped with the package: nothing is fetched from the internet.

Needs the ``ui`` extra (Starlette and uvicorn): ``pip install 'cloudtrain[ui]'``.
"""
from __future__ import annotations

import secrets
import socket
import sys
from typing import Optional

from ..spec.errors import BadInput

EXTRA_HINT = "cloudtrain ui needs the ui extra: pip install 'cloudtrain[ui]'"


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: a free one); BadInput if it is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise BadInput(f"--port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror}); "
                       "choose another or leave --port out") from None
    sock.listen(128)
    return sock


def serve(port: int = 0, open_browser: bool = True, *, out=None) -> int:
    try:
        import uvicorn
        from .app import Access, make_app
    except ImportError:
        raise BadInput(EXTRA_HINT) from None
    from . import data
    out = out or sys.stdout
    sock = bind(port)
    bound = sock.getsockname()[1]
    access = Access(secrets.token_urlsafe(32), secrets.token_urlsafe(32),
                    hosts=[f"127.0.0.1:{bound}", f"localhost:{bound}"])
    url = f"http://127.0.0.1:{bound}/?token={access.token}"
    print(f"cloudtrain ui: serving on 127.0.0.1 only; open\n    {url}\n(Ctrl-C stops it)", file=out, flush=True)
    if open_browser:
        import webbrowser
        webbrowser.open(url)
    config = uvicorn.Config(make_app(access, data), log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2)  # a log stream open in a browser ends then
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0


def main(port: Optional[int], no_browser: bool) -> int:
    return serve(port or 0, not no_browser)
