"""issue 32: ``cloudtrain ui`` in a real browser (Debian's headless Chromium through Selenium),
on jobs really run here (local, docker) and on the SageMaker double's jobs (moto): the page lists them,
a state change appears without a reload, logs stream, cancel asks first and works, and without
the token there is no page.  ``CLOUDTRAIN_UI_SCREENSHOTS=DIR`` keeps screenshots of the pages
(docs/img/ui-*.png were made so)."""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import EXAMPLES, cli_env, run_cli, write_job  # noqa: E402

ROLE = "arn:aws:iam::123456789012:role/train"
BUCKET = "ct-bucket"
SAGEMAKER = ["--set", f"providers.sagemaker.role_arn={ROLE}", "--set", f"providers.sagemaker.output_s3=s3://{BUCKET}/runs"]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
DOCKER_IMAGE = "cloudtrain/test-python:latest"  # scripts/build-test-image.sh
SHOTS = os.environ.get("CLOUDTRAIN_UI_SCREENSHOTS")


@pytest.fixture
def aws(aws_server, monkeypatch):
    return aws_server.fresh(monkeypatch, BUCKET)


def job_file(tmp_path, name, script):
    code = tmp_path / name
    code.mkdir()
    (code / "train.py").write_text(script)
    return write_job(tmp_path, f"""
        name: {name}
        code: {name}
        command: python -u train.py
        distribution: {{type: none, nodes: 1}}
    """, name=f"{name}.yaml")


def submitted(proc) -> str:
    assert proc.returncode == 0, proc.stderr
    said = [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("submitted ")]
    return said[0] if said else proc.stdout.strip().splitlines()[-1]


class Dashboard:
    def __init__(self, env):
        self.proc = subprocess.Popen([sys.executable, "-m", "cloudtrain", "ui", "--no-browser"], env=cli_env(env),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in self.proc.stdout:
            found = re.search(r"(http://127\.0\.0\.1:(\d+)/\?token=([\w-]+))", line)
            if found:
                self.url, self.port, self.token = found.group(1), int(found.group(2)), found.group(3)
                break
        else:
            raise AssertionError("cloudtrain ui printed no URL")
        self.base = f"http://127.0.0.1:{self.port}"

    def session_cookie(self) -> str:
        """The ``Cookie`` header a browser sends after opening the printed URL."""
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", "/?token=" + self.token)
        cookie = conn.getresponse().getheader("set-cookie").split(";")[0]
        conn.close()
        return cookie

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=20)


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def wait_until(predicate, timeout=60.0, what="the page to change"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def row_state(driver, handle):
    """The state the job's row shows, read in one step (the badge is redrawn when it changes)."""
    return driver.execute_script(
        "const b = document.querySelector(`#jobs tbody tr[data-handle='${arguments[0]}'] .state`);"
        "return b ? b.dataset.state : null;", handle)


def shot(driver, name):
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"ui-{name}.png"))


def test_without_the_token_nothing_is_served_and_changes_need_the_csrf_token(tmp_path, home):
    ui = Dashboard({})
    try:
        for path in ("/", "/static/app.js", "/api/jobs", "/api/costs", "/api/job/local://x"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(ui.base + path, timeout=10)
            assert refused.value.code == 403, path
        with pytest.raises(urllib.error.HTTPError) as wrong:  # a token, but not this server's
            urllib.request.urlopen(ui.base + "/?token=" + "x" * len(ui.token), timeout=10)
        assert wrong.value.code == 403
        rebinding = urllib.request.Request(ui.url, headers={"Host": "attacker.example:80"})
        with pytest.raises(urllib.error.HTTPError) as host:
            urllib.request.urlopen(rebinding, timeout=10)
        assert host.value.code == 421
        cookie = ui.session_cookie()
        # the token itself is no cookie (issue 39: the cookie holds a session value of its own)
        with pytest.raises(urllib.error.HTTPError) as raw:
            urllib.request.urlopen(urllib.request.Request(ui.base + "/api/jobs",
                                                          headers={"Cookie": f"cloudtrain_ui_{ui.port}={ui.token}"}),
                                   timeout=10)
        assert raw.value.code == 403
        jobs = urllib.request.urlopen(urllib.request.Request(ui.base + "/api/jobs", headers={"Cookie": cookie}),
                                      timeout=10)
        assert json.loads(jobs.read())["jobs"] == []
        forged = urllib.request.Request(ui.base + "/api/job/cancel/local://x", method="POST",
                                        headers={"Cookie": cookie})
        with pytest.raises(urllib.error.HTTPError) as csrf:
            urllib.request.urlopen(forged, timeout=10)
        assert csrf.value.code == 403
        import socket  # only on the loopback interface
        assert ui.url.startswith("http://127.0.0.1:")
        names = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
        for address in names:
            with pytest.raises(OSError):
                socket.create_connection((address, ui.port), timeout=2).close()
    finally:
        ui.close()


def test_the_page_lists_every_providers_jobs_live_streams_logs_and_cancels_after_asking(aws, tmp_path, home, browser):
    from selenium.webdriver.common.by import By
    env = aws.env()
    gate = tmp_path / "gate"
    done = submitted(run_cli("submit", "-p", "local", job_file(tmp_path, "quick", "print('done')\n"), env=env))
    waiting = submitted(run_cli("submit", "-p", "local", "--detach", job_file(tmp_path, "gated", (
        "import os, time\nprint('waiting for the gate', flush=True)\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.1)\nprint('through')\n")), env=env))
    chatty = submitted(run_cli("submit", "-p", "local", "--detach", job_file(tmp_path, "chatty", (
        "import time\nfor i in range(100000):\n    print('step', i, flush=True)\n    time.sleep(0.2)\n")), env=env))
    cloud = submitted(run_cli("submit", "-p", "sagemaker", EXAMPLES / "digits-ddp" / "job.yaml", *SAGEMAKER,
                              "--detach", env=env))
    assert cloud.startswith("sagemaker://")
    boxed = submitted(run_cli("submit", "-p", "docker", job_file(tmp_path, "boxed", "print('in a container')\n"),
                              "--set", f"image={DOCKER_IMAGE}", env=env))
    assert boxed.startswith("docker://")

    ui = Dashboard(env)
    try:
        browser.get(ui.url)
        assert browser.current_url == ui.base + "/"  # the token went into a cookie, out of the address bar
        wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")) == 5, what="5 job rows")
        assert row_state(browser, done) == "SUCCEEDED" and row_state(browser, boxed) == "SUCCEEDED"
        assert wait_until(lambda: row_state(browser, waiting) == "RUNNING", what="the gated job running")
        assert row_state(browser, cloud) in ("PENDING", "STARTING")
        cloud_row = browser.find_element(By.CSS_SELECTOR, f'#jobs tbody tr[data-handle="{cloud}"]').text
        assert "sagemaker" in cloud_row and "ml." in cloud_row  # provider, nodes x instance type
        shot(browser, "jobs")

        # a state change appears without a reload: the gated job finishes, and the cloud job starts
        marker = browser.execute_script("window.__noReload = 1; return window.__noReload;")
        browser.execute_script("window.__row = "
                               "document.querySelector(`#jobs tbody tr[data-handle='${arguments[0]}']`);", waiting)
        gate.write_text("go")
        aws.set_training(cloud.rsplit("/", 1)[-1], "InProgress", "Training")
        run_cli("list", "--refresh", env=env, check=0)  # what `list` read from the platform, the page shows
        wait_until(lambda: row_state(browser, waiting) == "SUCCEEDED", what="SUCCEEDED without a reload")
        wait_until(lambda: row_state(browser, cloud) == "RUNNING", what="the cloud job RUNNING without a reload")
        assert browser.execute_script("return window.__noReload;") == marker
        # the row changed where it stands (a user reading or selecting it keeps it)
        assert browser.execute_script(
            "return document.contains(window.__row) && window.__row.dataset.handle;") == waiting

        # filters
        browser.find_element(By.ID, "f-text").send_keys("chatty")
        wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")) == 1, what="the text filter")
        browser.find_element(By.ID, "f-text").clear()
        browser.execute_script("document.getElementById('f-text').dispatchEvent(new Event('input'))")
        wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")) == 5,
                   what="the filter cleared")

        # one job: logs stream while it runs, its request is shown, cancel asks first
        browser.find_element(By.CSS_SELECTOR, f'#jobs tbody tr[data-handle="{chatty}"]').click()
        logs = browser.find_element(By.ID, "job-logs")
        first = wait_until(lambda: len(re.findall(r"step \d+", logs.text)) >= 2 and logs.text, what="log lines")
        wait_until(lambda: len(logs.text) > len(first), what="more log lines (streamed)")
        request = json.loads(browser.find_element(By.ID, "job-request").text)
        assert request["provider"] == "local" and request["artifacts"][0]["kind"] == "local/process"
        assert browser.find_elements(By.CSS_SELECTOR, "#job-timeline circle.event")
        shot(browser, "job")

        browser.find_element(By.ID, "job-cancel").click()
        alert = wait_until(lambda: _alert(browser), what="the confirmation")
        assert chatty in alert.text
        alert.dismiss()  # asked, and said no: it runs on
        time.sleep(1)
        assert json.loads(run_cli("status", chatty, "-o", "json", env=env, check=0).stdout)["state"] == "RUNNING"
        browser.find_element(By.ID, "job-cancel").click()
        wait_until(lambda: _alert(browser), what="the confirmation").accept()
        wait_until(lambda: row_state(browser, chatty) == "CANCELLED", what="CANCELLED")
        assert json.loads(run_cli("status", chatty, "-o", "json", env=env, check=0).stdout)["state"] == "CANCELLED"

        browser.find_element(By.ID, "tab-resources").click()
        browser.find_element(By.ID, "r-accelerator").send_keys("A100")
        browser.find_element(By.CSS_SELECTOR, "#res-filters button").click()
        rows = wait_until(lambda: _resource_rows(browser, "A100"), what="the A100 catalog rows")
        assert {"sagemaker", "ec2", "azure"} <= {r[0] for r in rows}
        priced = [r for r in rows if r[6] != "-"]
        assert priced and all(r[6].endswith(("USD", "CNY")) for r in priced)  # the catalogs' sourced prices
        values = [float(r[6].split()[0]) for r in priced]
        assert values == sorted(values)  # cheapest first
        shot(browser, "resources")

        # a browser without the token (no cookie) gets no page
        browser.delete_all_cookies()
        browser.get(ui.base + "/")
        assert "403" in browser.title or "token" in browser.find_element(By.TAG_NAME, "body").text
        assert not browser.find_elements(By.ID, "jobs")
    finally:
        ui.close()


def _resource_rows(driver, accelerator):
    """The resources table's cells, once every row is of ``accelerator`` (the filtered answer)."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#resources tbody tr')]"
        ".map(tr => [...tr.children].map(td => td.textContent));")
    return rows if rows and all(accelerator in r[2] for r in rows) else None


def _alert(driver):
    from selenium.common.exceptions import NoAlertPresentException
    try:
        return driver.switch_to.alert
    except NoAlertPresentException:
        return None
