"""The dashboard's pictures of a job (issue 43 item 3), its attempts and the controller's next
step (issue 41 item 8), and the jobs table's layout fixes (issue 44 item 10), in the real browser.

No training runs here: the store and the jobs' logs are seeded with the report lines a job's
launcher writes (``cloudtrain.launch.report``'s form, with the ``[nodeN/rankR]`` prefix a local
job's log has), as bench/bench_ui.py seeds the ledger.  The metrics endpoint's bounds (1,000
points per metric out of 100,000 reports; 32 metrics; no metric named like a secret) are
checked over HTTP against the same ``cloudtrain ui`` process the browser uses."""
import http.client
import json
import time
import urllib.parse

from test_dashboard import Dashboard, browser, shot, wait_until  # noqa: F401  (browser: a fixture)

LIMIT = 1000  # cloudtrain.ui.series.MAX_POINTS


def report(step, t, rank=0, **metrics):
    body = json.dumps({"v": 1, "t": t, "step": step, "total_steps": 100000, "metrics": metrics},
                      separators=(",", ":"))
    return f"[node0/rank{rank}] CLOUDTRAIN_PROGRESS {body}"


def seed_local(tmp_path, job_id, lines, *, state="SUCCEEDED", started=None, ended=None, message="", name=None):
    """A local job in the store, its log holding ``lines``: its handle."""
    from cloudtrain.runtime.store import Store
    run_dir = tmp_path / "runs" / job_id
    run_dir.mkdir(parents=True)
    (run_dir / "job.log").write_text("".join(line + "\n" for line in lines))
    started = started if started is not None else time.time() - 600
    Store().add_job(id=job_id, provider="local", name=name or job_id, nodes=1, run_dir=str(run_dir), state=state,
                    started_at=started, ended_at=ended if ended is not None else started + 300, message=message)
    return f"local://{job_id}"


def append(tmp_path, job_id, lines):
    with open(tmp_path / "runs" / job_id / "job.log", "a") as f:
        f.write("".join(line + "\n" for line in lines))


def get(ui, cookie, path):
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=60)
    conn.request("GET", path, headers={"Cookie": cookie})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


def metrics_of(ui, cookie, handle):
    status, body = get(ui, cookie, "/api/job/metrics/" + urllib.parse.quote(handle, safe=""))
    assert status == 200, body[:300]
    return json.loads(body), len(body)


def polylines(driver, metric):
    """``{(handle, attempt): points}`` of the chart of ``metric``."""
    found = driver.execute_script(
        "return [...document.querySelectorAll(`#job-metrics svg[data-metric='${arguments[0]}'] polyline.series`)]"
        ".map(p => [p.dataset.handle, +p.dataset.attempt, +p.dataset.points,"
        " p.getAttribute('points').split(' ').length]);",
        metric)
    for _, _, said, drawn in found:
        assert said == drawn  # the polyline has as many vertices as it says
    return {(h, a): n for h, a, n, _ in found}


def charts(driver):
    return driver.execute_script("return [...document.querySelectorAll('#job-metrics svg.metric-chart')]"
                                 ".map(s => s.dataset.metric).sort();")


def test_the_metrics_endpoint_is_bounded_and_keeps_no_secret_shaped_name(tmp_path, home):
    t0 = time.time() - 3600
    many = [report(i, t0 + i * 0.01, loss=1.0 / (1 + i), accuracy=i / 100000) for i in range(100000)]
    wide = report(0, t0, **{f"m{i:02d}": float(i) for i in range(40)})
    secret = [
        report(1, t0, loss=0.5, aws_secret_access_key=123456789.0, api_token=987654321.0),
        "[node0/rank0] {'loss': 0.4, 'epoch': 1.0, 'password': 55555.125}",
        "[node0/rank0] epoch 2/10 loss 0.3 session_key 77777.5",
    ]
    big = seed_local(tmp_path, "big", many)
    seed_local(tmp_path, "wide", [wide])
    shaped = seed_local(tmp_path, "shaped", secret)
    seed_local(tmp_path, "kept", [report(0, t0, loss=0.9), report(1, t0 + 1, loss=0.8)])
    from cloudtrain.runtime.store import Store
    store = Store()
    ui = Dashboard({})
    try:
        cookie = ui.session_cookie()
        found, size = metrics_of(ui, cookie, big)
        assert found["reports"] == 100000
        assert sorted(found["metrics"]) == ["accuracy", "loss"]
        for points in found["metrics"].values():
            assert 2 <= len(points) <= LIMIT
            assert points[0][0] == 0 and points[-1][0] == 99999  # the first and the newest report are kept
            steps = [p[0] for p in points]
            assert steps == sorted(steps)
        assert size < 200_000  # 2 x 1,000 points, not 100,000 reports' worth (~10 MB of log)

        append(tmp_path, "big", [report(100000 + i, t0 + 1000 + i, loss=0.001, accuracy=1.0) for i in range(5)])
        again, _ = metrics_of(ui, cookie, big)  # the next question reads what was written since
        assert again["reports"] == 100005 and again["metrics"]["loss"][-1][0] == 100004
        assert len(again["metrics"]["loss"]) <= LIMIT

        wide_found, _ = metrics_of(ui, cookie, "local://wide")
        assert len(wide_found["metrics"]) == 32 and wide_found["metrics_dropped"] == 8

        status, body = get(ui, cookie, "/api/job/metrics/" + urllib.parse.quote(shaped, safe=""))
        assert status == 200
        text = body.decode()
        assert sorted(json.loads(text)["metrics"]) == ["loss"]
        for leaked in ("secret", "token", "password", "session", "123456789", "987654321", "55555", "77777"):
            assert leaked not in text.lower(), leaked

        # a followed job whose first attempt's local job was pruned: said, and the next attempt still drawn
        followed = "local://pruned"
        store.ledger_put({"handle": followed, "provider": "local", "job_id": "pruned", "name": "pruned",
                          "submitted_at": t0, "state": "RUNNING", "restarts": 1})
        store.plan_add({"handle": followed, "state": "RUNNING", "step": "alive", "candidates": "[]", "jobs": "{}"})
        for attempt, handle in enumerate((followed, "local://kept")):
            store.attempt_add({"handle": followed, "attempt": attempt, "provider": "local", "attempt_handle": handle,
                               "state": "running", "nodes": 1})
        pruned, _ = metrics_of(ui, cookie, followed)
        assert pruned["error"].startswith("local://pruned: ")  # (its words are the provider's)
        assert [p[3] for p in pruned["metrics"]["loss"]] == [1, 1]  # attempt 1's two reports

        status, _ = get(ui, cookie, "/api/job/metrics/local%3A%2F%2Fnone")
        assert status == 404
        status, _ = get(ui, "", "/api/job/metrics/" + urllib.parse.quote(big, safe=""))
        assert status == 403  # the token's rules hold for the new endpoint too
    finally:
        ui.close()


def test_every_metric_is_plotted_live_with_attempts_compared_runs_and_the_cost_against_the_budget(
        tmp_path, home, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    from cloudtrain.orchestrate.controller import Lock
    from cloudtrain.runtime.store import Store
    now = time.time()
    t0 = now - 3000
    # a local job the supervisor restarted once: 200 reports, the restart note, 100 more from step 150
    restarted = ([report(i, t0 + i, loss=2.0 - i / 200, lr=0.1) for i in range(200)]
                 + [report(i, t0 + i, rank=1, loss=9.0, lr=9.0) for i in range(50)]  # rank 1: not read
                 + ["[cloudtrain] node 0 exited with code 1; restarting every node (restart 1 of 2)"]
                 + [report(150 + i, t0 + 300 + i, loss=1.3 - i / 400, lr=0.05) for i in range(100)])
    first = seed_local(tmp_path, "first", restarted, started=t0, name="first-run")
    Store().add_restart("first", 1, "node 0 exited with code 1")
    second = seed_local(tmp_path, "second", [report(i * 4, t0 + i, loss=1.8 - i / 60) for i in range(50)],
                        started=t0, name="second-run")

    # a job the controller follows: attempt 0 failed on a node, attempt 1 runs; 2 nodes x 2 USD/h, max_cost 10
    a0 = seed_local(tmp_path, "plan-a0", [report(i, now - 7200 + i, loss=1.0) for i in range(100)],
                    state="FAILED", started=now - 7200, ended=now - 3600, name="followed")
    a1 = seed_local(tmp_path, "plan-a1", [report(80 + i, now - 1800 + i, loss=0.5) for i in range(50)],
                    started=now - 1800, name="followed")
    store = Store()
    store.plan_add({"handle": a0, "state": "RUNNING", "step": "alive", "candidates": json.dumps(["local"]),
                    "jobs": "{}", "max_restarts": 3, "failures": 1, "budget": 10.0, "currency": "USD"})
    for attempt, (handle, started, ended, reason) in enumerate(((a0, now - 7200, now - 3600, "node 1 lost"),
                                                                 (a1, now - 1800, None, ""))):
        store.attempt_add({"handle": a0, "attempt": attempt, "provider": "local", "attempt_handle": handle,
                           "state": "ended" if ended else "running", "nodes": 2, "rate": 2.0, "currency": "USD",
                           "started_at": started, "ended_at": ended, "kind": "node-failure" if ended else None,
                           "reason": reason})
    lock = Lock()  # this test holds the home's controller lock: no controller is started for the plan
    assert lock.acquire()
    ui = Dashboard({})
    try:
        browser.get(ui.url)
        row = wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, f'#jobs tbody tr[data-handle="{first}"]'),
                         what="the job's row")[0]
        row.click()
        wait_until(lambda: charts(browser) == ["loss", "lr"], what="one chart per metric")
        lines = wait_until(lambda: polylines(browser, "loss") or None, what="the loss curve")
        assert lines == {(first, 0): 200, (first, 1): 100}  # two attempts, rank 1's lines left out
        assert polylines(browser, "lr") == {(first, 0): 200, (first, 1): 100}
        marks = browser.execute_script("return [...document.querySelectorAll("
                                       "\"#job-metrics svg[data-metric='loss'] line.attempt-mark\")]"
                                       ".map(l => [l.dataset.attempt, l.querySelector('title').textContent]);")
        assert [m[0] for m in marks] == ["1"] and "node 0 exited with code 1" in marks[0][1]

        # another run on the same charts: ticked, not opened
        browser.find_element(By.CSS_SELECTOR, f'#jobs tbody tr[data-handle="{second}"] input.compare').click()
        wait_until(lambda: polylines(browser, "loss").get((second, 0)) == 50, what="the compared run's curve")
        assert (second, 0) not in polylines(browser, "lr")  # it reported no lr
        assert browser.find_element(By.ID, "job-title").text == first

        # live: reports written now appear without a reload
        append(tmp_path, "first", [report(250 + i, t0 + 400 + i, loss=1.0, lr=0.05) for i in range(20)])
        wait_until(lambda: polylines(browser, "loss").get((first, 1)) == 120, timeout=60, what="the new reports")
        shot(browser, "metrics")

        # over time: every report line carries its time
        Select(browser.find_element(By.ID, "m-x")).select_by_value("time")
        wait_until(lambda: polylines(browser, "loss") == {(first, 0): 200, (first, 1): 120, (second, 0): 50},
                   what="the curves over time")

        # the followed job: its attempts, the controller's next step, the cost so far against max_cost
        browser.find_element(By.CSS_SELECTOR, f'#jobs tbody tr[data-handle="{second}"] input.compare').click()
        browser.find_element(By.CSS_SELECTOR, f'#jobs tbody tr[data-handle="{a0}"]').click()
        wait_until(lambda: browser.find_element(By.ID, "job-title").text == a0, what="the followed job")
        attempts = wait_until(lambda: browser.execute_script(
            "return [...document.querySelectorAll('#job-attempts tbody tr')]"
            ".map(tr => [...tr.children].map(td => td.textContent));") or None, what="the attempts")
        assert [a[:3] for a in attempts] == [["0", "local", a0], ["1", "local", a1]]
        assert attempts[0][5] == "node 1 lost" and attempts[0][6] == "4.00 USD"  # 2 nodes x 2 USD x 1 h
        next_step = browser.find_element(By.ID, "job-next").text
        assert "next:" in next_step and a1 in next_step and "10 USD" in next_step
        Select(browser.find_element(By.ID, "m-x")).select_by_value("step")
        wait_until(lambda: polylines(browser, "loss") == {(a0, 0): 100, (a0, 1): 50}, what="both attempts' curves")
        # read in one script: the charts are redrawn live (every 5 s), so an element found in one
        # call may be gone by the next
        mark = wait_until(lambda: browser.execute_script(
            "const t = document.querySelector(\"#job-metrics svg[data-metric='loss'] line.attempt-mark title\");"
            "return t && t.textContent;"), what="the attempt mark")
        assert "attempt 1 (local)" in mark
        assert "node 1 lost" in mark  # why attempt 0 ended
        assert browser.find_elements(By.CSS_SELECTOR, "#job-cost line.budget")
        spent = wait_until(lambda: browser.execute_script(
            "const p = document.querySelector('#job-cost polyline.spent'); return p && p.getAttribute('points');"),
            what="the cost curve").split()
        assert len(spent) == 4  # two attempts: each one's start and end (now, for the running one)
        shot(browser, "attempts")
        cost_text = browser.find_element(By.ID, "job-cost-text").text
        assert "of a 10 USD budget" in cost_text and cost_text.startswith("6.0")  # 4 + 2 (half an hour so far)
    finally:
        ui.close()
        lock.release()


def test_the_detail_comes_into_view_long_messages_keep_the_costs_on_screen_and_times_are_24_hour(
        tmp_path, home, browser):
    from selenium.webdriver.common.by import By
    from cloudtrain.runtime.store import Store
    afternoon = time.mktime(time.strptime(time.strftime("%Y-%m-%d 15:04:05"), "%Y-%m-%d %H:%M:%S")) - 86400
    long_message = "Traceback: " + " ".join(f"frame{i} in module_{i}.py" for i in range(150))
    failed = seed_local(tmp_path, "failed", [], state="FAILED", started=afternoon, message=long_message)
    store = Store()
    for i in range(80):  # a long table (a ledger row of a cloud job each, priced)
        store.ledger_put({"handle": f"sagemaker://us-east-1/job-{i:03d}", "provider": "sagemaker",
                          "job_id": f"job-{i:03d}", "name": f"job-{i:03d}", "instance_type": "ml.g5.xlarge",
                          "nodes": 1, "rate": 1.5, "currency": "USD", "submitted_at": afternoon - 3600 - i,
                          "started_at": afternoon - 3600 - i, "ended_at": afternoon - 60, "state": "SUCCEEDED",
                          "restarts": 0, "refreshed_at": time.time()})
    ui = Dashboard({})
    try:
        browser.get(ui.url)
        wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")) == 81, what="81 rows")
        cells = browser.execute_script(
            "const tr = document.querySelector(`#jobs tbody tr[data-handle='${arguments[0]}']`);"
            "return [...tr.children].map(td => td.textContent);", failed)
        assert time.strftime("%Y-%m-%d %H:%M", time.localtime(afternoon)) in cells  # as `list` prints it
        assert not any(("AM" in c or "PM" in c) for c in cells)

        # the failure's message is cut to its column, whole on hover: the cost column stays on the screen
        widths = browser.execute_script(
            "const tr = document.querySelector(`#jobs tbody tr[data-handle='${arguments[0]}']`);"
            "return [tr.lastElementChild.getBoundingClientRect().right, document.documentElement.clientWidth,"
            " tr.querySelector('.reason').title];", failed)
        assert widths[0] <= widths[1] and widths[2] == long_message

        # the newest job's detail, below 80 more rows, opens into view, its message whole
        browser.execute_script("window.scrollTo(0, 0)")
        browser.find_element(By.CSS_SELECTOR, f'#jobs tbody tr[data-handle="{failed}"]').click()
        wait_until(lambda: browser.find_element(By.ID, "job-title").text == failed, what="the failed job's detail")
        assert browser.execute_script(
            "const r = document.getElementById('job').getBoundingClientRect();"
            "return r.top > -2 && r.top < window.innerHeight;")  # (scrolled to: its top at 0, within a pixel)
        assert browser.find_element(By.ID, "job-message").text == long_message  # the whole message
        updated = browser.find_element(By.ID, "updated").text
        assert updated.startswith("updated ") and not updated.endswith(("AM", "PM"))
    finally:
        ui.close()


def test_a_metric_keeps_at_most_twice_its_limit_in_memory_and_answers_its_limit():
    count = 100000
    from cloudtrain.ui.series import Thinned
    thinned = Thinned(LIMIT)
    most = 0
    for i in range(count):
        thinned.add((float(i), None, float(i), 0))
        most = max(most, len(thinned.points))
    out = thinned.out()
    assert most < 2 * LIMIT and len(out) == LIMIT
    assert out[0][0] == 0 and out[-1][0] == count - 1
    gaps = [b[0] - a[0] for a, b in zip(out, out[1:-1])]  # (the newest comes whenever it came)
    assert max(gaps) <= 2 * min(gaps)  # evenly spread, not bunched at one end



def test_a_platform_log_without_node_prefixes_shows_a_restart_by_the_platform_as_an_attempt():
    """A cloud job's log (CloudWatch, pod logs: no ``[nodeN/rankR]``), read through its provider
    at most once per ``REMOTE_TTL``: a step lower than the one before starts an attempt."""
    from cloudtrain.ui import series
    lines = ([report(i, 1000.0 + i, loss=1.0)[len("[node0/rank0] "):] for i in range(100)]
             + ["{'loss': 0.9, 'learning_rate': 5e-05, 'epoch': 1.0}", "unrelated line", "step 3/x loss"]
             + [report(40 + i, 2000.0 + i, loss=0.8)[len("[node0/rank0] "):] for i in range(20)])
    reads = []

    def read():
        reads.append(len(lines))
        return iter(lines)
    found = series.remote_series("sagemaker://us-east-1/charts-test", read)
    assert found["reports"] == 121 and [a["attempt"] for a in found["attempts"]] == [0, 1]
    loss = found["metrics"]["loss"]
    assert sum(1 for p in loss if p[3] == 0) == 101 and sum(1 for p in loss if p[3] == 1) == 20
    assert sorted(found["metrics"]) == ["learning_rate", "loss"]
    again = series.remote_series("sagemaker://us-east-1/charts-test", read)
    assert again == found and reads == [len(lines)]  # not read again within REMOTE_TTL
