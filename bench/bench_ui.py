"""The dashboard with 10,000 jobs in the ledger (issue 32's goals: the jobs API answers within
100 ms, and the jobs page has painted its first rows within 1 s in headless Chromium).

    PYTHONPATH=core:plugins python bench/bench_ui.py [--jobs 10000] [--rounds 20]

A fresh CLOUDTRAIN_HOME gets N ledger rows (local, docker, sagemaker, azure, tione rows with
rates, in every state), ``cloudtrain ui --no-browser`` serves it, and:
- ``GET /api/jobs`` (what the page asks for every 2 s: the newest 500), and
  ``GET /api/jobs?q=...`` (a text filter), timed from this process over loopback: medians;
- beside them, ``cloudtrain list -o json`` over the same ledger (the CLI's answer to the same
  question, cold start included);
- in Debian's headless Chromium (Selenium), the time from navigation start to the page's
  ``cloudtrain-first-rows`` performance mark (set in the animation frame after the first rows
  are in the table): medians of fresh page loads;
- a local job whose log holds ``--reports`` report lines (issue 43: the metrics charts):
  ``GET /api/job/metrics/<handle>`` the first time (the whole log read), again (nothing new),
  and after 1,000 more reports; the answer's size (at most 1,000 points per metric).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STATES = ["SUCCEEDED", "FAILED", "CANCELLED", "RUNNING", "PENDING"]
PROVIDERS = [("local", None, None, None), ("docker", None, None, None), ("sagemaker", "ml.p4d.24xlarge", 37.69, "USD"),
             ("azure", "Standard_ND96asr_v4", 27.2, "USD"), ("tione", "TI.GN8.40XLARGE320", 150.0, "CNY")]


def seed(home: Path, n: int) -> None:
    os.environ["CLOUDTRAIN_HOME"] = str(home)
    from cloudtrain.runtime.store import Store
    store = Store()
    now = time.time()
    rng = random.Random(7)
    rows = []
    for i in range(n):
        provider, itype, rate, currency = PROVIDERS[i % len(PROVIDERS)]
        submitted = now - (n - i) * 60
        state = STATES[rng.randrange(len(STATES))] if i < n - 20 else "RUNNING"
        if provider in ("local", "docker") and state in ("RUNNING", "PENDING"):
            state = "SUCCEEDED"  # a local job's live state is its supervisor's (none here)
        started = submitted + 30
        ended = started + rng.randrange(60, 7200) if state in ("SUCCEEDED", "FAILED", "CANCELLED") else None
        handle = f"{provider}://{'us-east-1/' if provider == 'sagemaker' else ''}job-{i:05d}"
        rows.append((handle, provider, handle.rsplit("/", 1)[-1], f"job-{i:05d}", itype, 2, 0, rate, currency,
                     submitted, started, ended, state, rng.randrange(3), now))  # read just now: not stale
    with store._connect() as db:
        db.execute("BEGIN")
        db.executemany("INSERT INTO ledger (handle, provider, job_id, name, instance_type, nodes, spot, rate, "
                       "currency, "
                       "submitted_at, started_at, ended_at, state, restarts, refreshed_at) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        db.execute("COMMIT")


def seed_reports(home: Path, n: int) -> str:
    """A finished local job whose log holds ``n`` report lines (loss, accuracy, lr): its handle."""
    from cloudtrain.runtime.store import Store
    run_dir = home / "bench-runs" / "bench-metrics"
    run_dir.mkdir(parents=True)
    t0 = time.time() - n
    append_reports(run_dir / "job.log", 0, n, t0)
    Store().add_job(id="bench-metrics", provider="local", name="bench-metrics", nodes=1, run_dir=str(run_dir),
                    state="SUCCEEDED", started_at=t0, ended_at=t0 + n)
    return "local://bench-metrics"


def append_reports(path: Path, first: int, n: int, t0: float) -> None:
    with open(path, "a") as f:
        for i in range(first, first + n):
            body = json.dumps({"v": 1, "t": t0 + i, "step": i, "total_steps": 10 ** 7,
                               "metrics": {"loss": 1 / (1 + i), "accuracy": i / (i + 100), "lr": 1e-4}},
                              separators=(",", ":"))
            f.write(f"[node0/rank0] CLOUDTRAIN_PROGRESS {body}\n")


def timed_size(url: str, cookie: str) -> tuple:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        body = response.read()
    took = time.perf_counter() - start
    found = json.loads(body)
    return took, len(body), max(len(v) for v in found["metrics"].values()), found["reports"]


def timed_get(url: str, cookie: str) -> float:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        json.loads(response.read())
    return time.perf_counter() - start


def first_rows(url: str, rounds: int) -> list:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    times = []
    try:
        driver.get(url)  # the token into the cookie
        base = url.split("/?")[0] + "/"
        for _ in range(rounds):
            driver.get(base)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                found = driver.execute_script(
                    "const m = performance.getEntriesByName('cloudtrain-first-rows'); "
                    "return m.length ? m[0].startTime : null;")
                if found is not None:
                    times.append(found / 1000)
                    break
                time.sleep(0.02)
    finally:
        driver.quit()
    return times


def session_cookie(base: str, token: str) -> str:
    """The cookie the dashboard sets when its printed URL is opened (its own session value)."""
    import http.client
    conn = http.client.HTTPConnection(base.split("//", 1)[1], timeout=10)
    conn.request("GET", "/?token=" + token)
    cookie = conn.getresponse().getheader("set-cookie").split(";")[0]
    conn.close()
    return cookie


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--reports", type=int, default=100000)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ct-bench-ui-"))
    seed(home, args.jobs)
    metrics_handle = seed_reports(home, args.reports)
    env = dict(os.environ, CLOUDTRAIN_HOME=str(home))
    ui = subprocess.Popen([sys.executable, "-m", "cloudtrain", "ui", "--no-browser"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = next(m.group(0) for line in ui.stdout
                   for m in [re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", line)] if m)
        base, token = url.split("/?token=")
        cookie = session_cookie(base, token)
        api = [timed_get(base + "/api/jobs", cookie) for _ in range(args.rounds)]
        text = [timed_get(base + "/api/jobs?q=job-0999", cookie) for _ in range(args.rounds)]
        cli = []
        for _ in range(max(3, args.rounds // 4)):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "cloudtrain", "list", "-o", "json"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            cli.append(time.perf_counter() - start)
        paint = first_rows(url, max(3, args.rounds // 4))
        metrics_url = base + "/api/job/metrics/" + urllib.parse.quote(metrics_handle, safe="")
        cold = timed_size(metrics_url, cookie)
        warm = [timed_size(metrics_url, cookie)[0] for _ in range(args.rounds)]
        log = home / "bench-runs" / "bench-metrics" / "job.log"
        append_reports(log, args.reports, 1000, time.time() - args.reports)
        grown = timed_size(metrics_url, cookie)
    finally:
        ui.terminate()
        ui.wait(timeout=20)

    def line(what, values, goal=None):
        med = statistics.median(values)
        verdict = "" if goal is None else (" PASS" if med <= goal else " MISS")
        print(f"{what:<62} {med * 1000:8.1f} ms  ({min(values) * 1000:.1f} - {max(values) * 1000:.1f}, n={len(values)})"
              + (f"  goal <= {goal * 1000:.0f} ms{verdict}" if goal else ""))
    print(f"ledger: {args.jobs} jobs")
    line("GET /api/jobs (the newest 500)", api, 0.100)
    line("GET /api/jobs?q=job-0999 (text filter)", text, 0.100)
    line("cloudtrain list -o json (every row, cold start), for comparison", cli)
    line("headless Chromium: navigation start -> first rows painted", paint, 1.0)
    print(f"metrics of a job with {cold[3]} reports: the first GET (whole log read) {cold[0] * 1000:.0f} ms, "
          f"{cold[1] / 1024:.0f} KiB, {cold[2]} points per metric at most")
    line("GET /api/job/metrics/<handle> again (nothing new in the log)", warm)
    print(f"after 1,000 more reports: {grown[0] * 1000:.0f} ms, {grown[3]} reports, "
          f"{grown[2]} points per metric at most")
    return 0


if __name__ == "__main__":
    sys.exit(main())
