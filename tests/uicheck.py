"""The dashboard's chart of a job, as headless Chromium draws it: for a test of a real run outside
tests/ui (issue 43: "the UI draws its loss curve" of the digits job).  The ``cloudtrain ui``
process and the browser are this helper's own, ended before it returns."""
import re
import subprocess
import sys
import time

from conftest import cli_env


def chart_points(handle: str, metric: str, env=None, timeout: float = 60.0) -> dict:
    """``{(handle, attempt): points}`` of the curves the chart of ``metric`` draws once the
    job's row is clicked in ``cloudtrain ui``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    ui = subprocess.Popen([sys.executable, "-m", "cloudtrain", "ui", "--no-browser"], env=cli_env(env),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    driver = None
    try:
        url = next(m.group(0) for line in ui.stdout
                   for m in [re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", line)] if m)
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--window-size=1400,1000"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        driver.get(url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            clicked = driver.execute_script(
                "const tr = document.querySelector(`#jobs tbody tr[data-handle='${arguments[0]}']`);"
                "if (tr) tr.click(); return !!tr;", handle)
            if clicked:
                break
            time.sleep(0.1)
        while time.monotonic() < deadline:
            found = driver.execute_script(
                "return [...document.querySelectorAll(`#job-metrics svg[data-metric='${arguments[0]}'] "
                "polyline.series`)].map(p => [p.dataset.handle, +p.dataset.attempt, +p.dataset.points]);", metric)
            if found:
                return {(h, a): n for h, a, n in found}
            time.sleep(0.1)
        raise AssertionError(f"the dashboard drew no {metric} chart for {handle} within {timeout:.0f} s")
    finally:
        if driver is not None:
            driver.quit()
        ui.terminate()
        ui.wait(timeout=20)
