"""``cloudtrain ui``: every job on every provider in one web page, on 127.0.0.1 only.

``serve(port, open_browser)`` binds 127.0.0.1 (port 0: any free one), prints the URL with a new
random token (as Jupyter does) and serves until Ctrl-C.  The browser is opened on a private
file (0600, in a 0700 folder of ``$CLOUDTRAIN_HOME``) that sends it to that URL, as Jupyter's
``use_redirect_file`` does: the token is never on a command line, which ``ps`` shows every local
user.  The app (``app.py``) answers only requests that carry the token; what it shows comes
from ``data.py`` (the ledger, the catalogs and the providers' logs/cancel/outputs calls); the
page (``static/``) is plain HTML, CSS and JavaScript shipped with the package: nothing is
fetched from the internet.

Needs the ``ui`` extra (Starlette and uvicorn): ``pip install 'cloudtrain[ui]'``.
"""
from __future__ import annotations

import html
import os
import secrets
import signal
import socket
import sys
from pathlib import Path
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
                    hosts=[f"127.0.0.1:{bound}", f"localhost:{bound}"], port=bound)
    url = f"http://127.0.0.1:{bound}/?token={access.token}"
    print(f"cloudtrain ui: serving on 127.0.0.1 only; open\n    {url}\n(Ctrl-C stops it)", file=out, flush=True)
    opener = redirect_file(url, bound) if open_browser else None
    if opener is not None:
        import webbrowser
        webbrowser.open(opener.as_uri())
    config = uvicorn.Config(make_app(access, data), log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2)  # a log stream open in a browser ends then
    server = uvicorn.Server(config)
    # uvicorn re-raises a SIGTERM/SIGHUP it caught once it has shut down: as KeyboardInterrupt
    # here, so the redirect file (it holds the token) is removed on those too
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupted)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        if opener is not None:
            opener.unlink(missing_ok=True)
    return 0


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def redirect_file(url: str, port: int) -> Path:
    """A page that sends the browser to ``url`` (which holds the token), readable by this user
    only: ``$CLOUDTRAIN_HOME/ui/open-<port>.html``, 0600 in a 0700 folder, made anew (never
    written through a name that is there already)."""
    from ..input.homedir import make_home, private_dir
    folder = private_dir(make_home() / "ui")
    path = folder / f"open-{port}.html"
    path.unlink(missing_ok=True)
    quoted = html.escape(url, quote=True)
    page = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={quoted}">'
            f'<title>cloudtrain ui</title></head>\n'
            f'<body><p><a href="{quoted}">Open cloudtrain ui</a></p></body></html>\n')
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(page)
    return path


def main(port: Optional[int], no_browser: bool) -> int:
    return serve(port or 0, not no_browser)
