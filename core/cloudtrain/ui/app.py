"""The dashboard's web app (Starlette): one page, a JSON API over the ledger, logs as a stream.

Access: every request needs the server's token, from the URL the command prints (``?token=``,
which sets an HttpOnly, SameSite=Strict cookie and redirects to the bare URL) or that cookie.
Cookies ignore ports (RFC 6265 section 8.5: every server on 127.0.0.1 receives them), so the
cookie is named after this server's port (two dashboards keep their own) and holds a random
session value of this server's, never the token.
The Host header must be this server's own address (a page elsewhere that points a name of its
own at 127.0.0.1 is refused: DNS rebinding).  What changes something (cancel, fetching outputs)
is a POST that also carries the page's CSRF token in the ``X-CSRF-Token`` header, which a
form or a page of another origin cannot send.
"""
from __future__ import annotations

import hmac
import json
import secrets
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, \
    Response, StreamingResponse
from starlette.routing import Route

STATIC = Path(__file__).with_name("static")
COOKIE = "cloudtrain_ui"  # the prefix of the cookie's name: cloudtrain_ui_<port>
ASSETS = {"app.js": "text/javascript", "app.css": "text/css"}


class Access:
    """The server's secrets: the token (in the URL it prints), the session (the cookie's value,
    under ``cookie``: a name of this port's) and the CSRF token (in the page)."""

    def __init__(self, token: str, csrf: str, hosts: List[str], port: int = 0):
        self.token, self.csrf, self.hosts = token, csrf, hosts
        self.cookie = f"{COOKIE}_{port}"
        self.session = secrets.token_urlsafe(32)

    def host_ok(self, request: Request) -> bool:
        return request.headers.get("host", "") in self.hosts

    def token_ok(self, request: Request) -> bool:
        if "token" in request.query_params:
            return hmac.compare_digest(request.query_params["token"].encode(), self.token.encode())
        return hmac.compare_digest(request.cookies.get(self.cookie, "").encode(), self.session.encode())

    def csrf_ok(self, request: Request) -> bool:
        return hmac.compare_digest(request.headers.get("x-csrf-token", "").encode(), self.csrf.encode())


def _refused(status: int, text: str) -> Response:
    return PlainTextResponse(text + "\n", status_code=status)


def make_app(access: Access, data) -> Starlette:
    """The app; ``data`` (``cloudtrain.ui.data``, or a stand-in in a benchmark) answers its questions."""

    def guarded(handler, *, change: bool = False):
        async def endpoint(request: Request) -> Response:
            if not access.host_ok(request):
                return _refused(421, "cloudtrain ui: wrong Host")
            if not access.token_ok(request):
                return _refused(403, "cloudtrain ui: open the URL that `cloudtrain ui` printed (it holds the token)")
            if change and not access.csrf_ok(request):
                return _refused(403, "cloudtrain ui: missing or wrong CSRF token")
            return await handler(request)
        return endpoint

    async def page(request: Request) -> Response:
        if "token" in request.query_params:  # into the cookie, out of the address bar and history
            response = RedirectResponse("/", status_code=303)
            response.set_cookie(access.cookie, access.session, httponly=True, samesite="strict", path="/")
            return response
        html = (STATIC / "index.html").read_text(encoding="utf-8").replace("{{csrf}}", access.csrf)
        return HTMLResponse(html, headers=_page_headers())

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return _refused(404, "not found")
        return FileResponse(STATIC / name, media_type=ASSETS[name], headers={"Cache-Control": "no-cache"})

    async def jobs(request: Request) -> Response:
        q = request.query_params
        limit = _number(q, "limit", 500)
        if isinstance(limit, Response):
            return limit
        return _json(await _threaded(data.jobs, providers=_split(q.get("provider")), states=_split(q.get("state")),
                                     since=q.get("since") or None, text=q.get("q") or None, limit=limit))

    async def job(request: Request) -> Response:
        found = await _threaded(data.job, request.path_params["handle"])
        return _json(found) if found is not None else _refused(404, "no such job in the ledger")

    async def logs(request: Request) -> Response:
        handle = request.path_params["handle"]
        return StreamingResponse(_events(data.logs(handle)), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def metrics(request: Request) -> Response:
        found = await _threaded(data.metrics, request.path_params["handle"])
        return _json(found) if found is not None else _refused(404, "no such job in the ledger")

    async def cancel(request: Request) -> Response:
        return _json(await _threaded(data.cancel, request.path_params["handle"]))

    async def outputs(request: Request) -> Response:
        return _json(await _threaded(data.outputs, request.path_params["handle"]))

    async def resources(request: Request) -> Response:
        q = request.query_params
        gpus = _number(q, "gpus", None)
        if isinstance(gpus, Response):
            return gpus
        return _json(await _threaded(data.resources, accelerator=q.get("accelerator") or None,
                                     gpus=gpus, provider=q.get("provider") or None))

    async def costs(request: Request) -> Response:
        return _json(await _threaded(data.costs, since=request.query_params.get("since") or None))

    routes = [
        Route("/", guarded(page)),
        Route("/static/{name}", guarded(asset)),
        Route("/api/jobs", guarded(jobs)),
        Route("/api/job/logs/{handle:path}", guarded(logs)),
        Route("/api/job/cancel/{handle:path}", guarded(cancel, change=True), methods=["POST"]),
        Route("/api/job/outputs/{handle:path}", guarded(outputs, change=True), methods=["POST"]),
        Route("/api/job/metrics/{handle:path}", guarded(metrics)),
        Route("/api/job/{handle:path}", guarded(job)),
        Route("/api/resources", guarded(resources)),
        Route("/api/costs", guarded(costs)),
    ]
    return Starlette(routes=routes, exception_handlers={Exception: _error})


def _page_headers() -> Dict[str, str]:
    # everything the page uses ships with the package: nothing from elsewhere may load
    return {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                                      "script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
            "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


async def _error(request: Request, exc: Exception) -> Response:
    from ..spec.errors import CloudtrainError
    if isinstance(exc, CloudtrainError):  # our one-line messages (bad input, a platform's refusal)
        return JSONResponse({"error": str(exc)}, status_code=400 if exc.exit_code == 2 else 502)
    return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=500)


def _json(value) -> Response:
    return Response(json.dumps(value, default=str), media_type="application/json",
                    headers={"Cache-Control": "no-store"})


def _number(query, name: str, default: Optional[int]):
    """The whole number ``?name=`` gives (``default`` when absent), or a 400 answer saying what is wrong."""
    text = query.get(name)
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        return JSONResponse({"error": f"{name} must be a whole number, not {text[:40]!r}"}, status_code=400)


def _split(text: Optional[str]) -> Optional[List[str]]:
    return [t for t in text.split(",") if t] if text else None


async def _threaded(fn, *args, **kwargs):
    """A store read or a platform call, off the event loop (other requests go on meanwhile)."""
    from starlette.concurrency import run_in_threadpool
    return await run_in_threadpool(fn, *args, **kwargs)


async def _events(lines: Iterator[str]):
    """Server-sent events, one per log line; a last ``end`` event when the log ends.  The lines
    come from a thread (a follow blocks), through a queue, so the loop is never blocked."""
    import asyncio
    queue: asyncio.Queue = asyncio.Queue(maxsize=10000)
    loop = asyncio.get_running_loop()
    stop = threading.Event()

    def pump():
        try:
            for line in lines:
                if stop.is_set():
                    return
                loop.call_soon_threadsafe(queue.put_nowait, ("line", line.rstrip("\n")))
        except Exception as exc:  # noqa: BLE001  (said in the stream, not lost)
            loop.call_soon_threadsafe(queue.put_nowait, ("error", str(exc)))
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, ("end", ""))

    threading.Thread(target=pump, daemon=True).start()
    try:
        yield ": stream\n\n"
        while True:
            kind, text = await queue.get()
            payload = json.dumps(text)
            yield f"event: {kind}\ndata: {payload}\n\n" if kind != "line" else f"data: {payload}\n\n"
            if kind == "end":
                return
    finally:
        stop.set()
