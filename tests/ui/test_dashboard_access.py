"""The dashboard's token stays its user's on a shared machine (issue 39, items 4 and 5), and a
bad query is a 400 (item 8).

- The browser is started on a private redirect file (as Jupyter's ``use_redirect_file``): its
  command line, which ``ps`` shows every local user, holds no token.  The test's browser is a
  recorder (``$BROWSER``, which Python's ``webbrowser`` runs) that keeps its argv.
- The cookie is per port and is not the token: cookies ignore ports (RFC 6265 section 8.5), so a
  browser sends one dashboard's cookie to every server on 127.0.0.1.  With a real cookie jar
  (``http.cookiejar``, which also ignores ports), two dashboards keep both their sessions, and
  another loopback server the browser visits receives no token.
"""
import http.client
import http.cookiejar
import http.server
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import cli_env
from otheruser import as_other_user


class Dashboard:
    def __init__(self, env, *args):
        self.proc = subprocess.Popen([sys.executable, "-m", "cloudtrain", "ui", *args], env=cli_env(env),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in self.proc.stdout:
            found = re.search(r"(http://127\.0\.0\.1:(\d+)/\?token=([\w-]+))", line)
            if found:
                self.url, self.port, self.token = found.group(1), int(found.group(2)), found.group(3)
                break
        else:
            raise AssertionError("cloudtrain ui printed no URL")
        self.base = f"http://127.0.0.1:{self.port}"

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=20)


@pytest.fixture
def dashboards(home):
    started = []

    def start(env=None, *args):
        started.append(Dashboard(dict(env or {}), *(args or ("--no-browser",))))
        return started[-1]
    yield start
    for ui in started:
        ui.close()
    assert all(ui.proc.poll() is not None for ui in started)


def test_the_browser_is_opened_on_a_private_file_and_its_command_line_holds_no_token(tmp_path, dashboards, home):
    record = tmp_path / "browser-argv.json"
    browser = tmp_path / "browser.py"
    browser.write_text("import json, sys\n"
                       f"open({str(record)!r}, 'w').write(json.dumps(sys.argv))\n")
    ui = dashboards({"BROWSER": f"{sys.executable} {browser} %s"}, "--port", "0")
    while not (record.exists() and record.read_text()):  # the recorder runs once the server printed its URL
        assert ui.proc.poll() is None, "cloudtrain ui ended"
        time.sleep(0.05)
    argv = json.loads(record.read_text())
    assert ui.token not in " ".join(argv)
    assert argv[-1].startswith("file://")
    page = Path(urllib.request.url2pathname(argv[-1][len("file://"):]))
    info = page.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.getuid()
    assert stat.S_IMODE(page.parent.stat().st_mode) == 0o700 and page.is_relative_to(home)
    assert ui.url in page.read_text().replace("&amp;", "&")  # it sends the browser to the URL with the token
    # another local user cannot read it
    os.chmod(home.parent, 0o755)
    said = as_other_user("import sys\ntry:\n    open(sys.argv[1]).read()\n    print('read')\n"
                         "except PermissionError:\n    print('refused')\n", str(page))
    assert said.stdout.strip() == "refused"
    ui.close()
    assert not page.exists()  # gone with the server


def _login(jar, ui):
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    assert opener.open(ui.url, timeout=10).status == 200
    return opener


def test_two_dashboards_keep_their_sessions_and_their_cookies_are_not_the_token(dashboards):
    first, second = dashboards(), dashboards()
    jar = http.cookiejar.CookieJar()  # one browser: its cookies go to every port of 127.0.0.1
    opener = _login(jar, first)
    _login(jar, second)
    for ui in (first, second):
        answer = opener.open(ui.base + "/api/jobs", timeout=10)
        assert answer.status == 200 and json.loads(answer.read())["jobs"] == []
    cookies = {c.name: c.value for c in jar}
    assert sorted(cookies) == sorted([f"cloudtrain_ui_{first.port}", f"cloudtrain_ui_{second.port}"])
    assert not {first.token, second.token} & set(cookies.values())
    # another server on 127.0.0.1 that the browser visits gets the cookies, and no token in them
    heard = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            heard.append(self.headers.get("Cookie", ""))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        opener.open(f"http://127.0.0.1:{server.server_port}/", timeout=10)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert heard and "cloudtrain_ui_" in heard[0]
    assert first.token not in heard[0] and second.token not in heard[0]


def test_the_login_sets_an_httponly_strict_cookie_named_for_the_port(dashboards):
    ui = dashboards()
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=10)
    conn.request("GET", "/?token=" + ui.token)
    answer = conn.getresponse()
    cookie = answer.getheader("set-cookie")
    conn.close()
    assert answer.status == 303 and cookie.startswith(f"cloudtrain_ui_{ui.port}=")
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower() and ui.token not in cookie


@pytest.mark.parametrize("query", ["/api/jobs?limit=abc", "/api/resources?gpus=eight"])
def test_a_number_that_is_not_one_is_a_400_that_says_which(dashboards, query):
    ui = dashboards()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{ui.base}{query}&token={ui.token}", timeout=10)
    assert refused.value.code == 400
    said = json.loads(refused.value.read())["error"]
    assert query.split("?")[1].split("=")[0] in said and "whole number" in said
