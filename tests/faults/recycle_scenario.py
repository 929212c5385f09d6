"""Run inside a PID namespace of its own (``unshare --pid --fork --mount-proc``), as its PID 1:
``python recycle_scenario.py JOB_FILE SIGNALS_FILE REPORT_JSON``.

PID 1 only reaps (orphans come to it, and a zombie would keep its PID); its child carries out
the scenario: a detached job whose supervisor, watchdog and node are killed outright, their PIDs
handed to unrelated processes (``ns_last_pid``: no other process of the machine forks in this
namespace, so the number comes round at once), then ``status``, ``list``, ``cancel`` and
``wait``; what they said and whether the unrelated processes were touched go to REPORT_JSON."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent)]
from faultlib import VICTIM, children, job_processes, poll  # noqa: E402


def cli(*args):
    return subprocess.run([sys.executable, "-m", "cloudtrain", *args], capture_output=True, text=True, timeout=120)


def gone(pid):
    return not os.path.exists(f"/proc/{pid}")


def spawn_with_pid(pid, signals_file):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    proc = subprocess.Popen([sys.executable, "-c", VICTIM, str(signals_file)], start_new_session=True,
                            stdout=subprocess.PIPE, text=True)
    assert proc.pid == pid, (proc.pid, pid)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def scenario(job_file, signals_file, report_file):
    from cloudtrain.runtime.store import Store, home
    handle = cli("submit", job_file, "--detach").stdout.strip()
    job_id = handle.split("://", 1)[1]
    store = Store()
    log = home() / "runs" / job_id / "job.log"
    poll(lambda: log.exists() and "up" in log.read_text(), bound=60)
    supervisor = store.get_job(job_id)["supervisor_pid"]
    node = store.get_nodes(job_id)[0]["pid"]
    for pid in [p for p in children(supervisor) if p != node]:  # the watchdog: nothing may tidy up
        os.kill(pid, signal.SIGKILL)
    os.killpg(node, signal.SIGKILL)
    os.kill(supervisor, signal.SIGKILL)
    ours = {1, os.getpid()}  # this namespace's reaper and this process have CLOUDTRAIN_HOME too
    poll(lambda: gone(supervisor) and gone(node) and not set(job_processes(home())) - ours, bound=30)
    left = store.get_job(job_id)["state"]
    victims = [spawn_with_pid(supervisor, signals_file), spawn_with_pid(node, signals_file)]
    report = {"handle": handle, "supervisor": supervisor, "node": node, "state_left": left,
              "victim_pids": [v.pid for v in victims]}
    report["status"] = json.loads(cli("status", handle, "-o", "json").stdout)
    report["list"] = [j["state"] for j in json.loads(cli("list", "-p", "local", "-o", "json").stdout)
                      if j["handle"] == handle]
    report["cancel"] = cli("cancel", handle).returncode
    report["wait"] = cli("wait", handle).returncode
    report["status_after"] = json.loads(cli("status", handle, "-o", "json").stdout)
    time.sleep(0.5)
    report["victims_alive"] = [v.poll() is None for v in victims]
    for v in victims:
        v.kill()
        v.wait()
    Path(report_file).write_text(json.dumps(report))


def main():
    child = os.fork()
    if child == 0:
        code = 0
        try:
            scenario(*sys.argv[1:4])
        except BaseException as exc:
            print(f"scenario failed: {exc!r}", file=sys.stderr)
            code = 1
        finally:
            os._exit(code)
    while True:  # PID 1: reap every orphan until the scenario ends
        pid, status = os.wait()
        if pid == child:
            return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
