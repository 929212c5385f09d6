"""A small ModelArts (REST v2) and CCE endpoint on 127.0.0.1 for the real Huawei Cloud SDK clients.

Routes on method + path as the service does, checks every request carries an AK/SK signature
(``Authorization: SDK-HMAC-SHA256 Access=<AK>, SignedHeaders=..., Signature=...``, ``X-Sdk-Date``,
``X-Project-Id``) and answers errors with the SDK's error envelope ``{"error_code", "error_msg"}``
and an ``X-Request-Id``.  Tests play the platform: ``set_phase`` moves a job, ``log`` appends to a
task's log; ``calls`` records (method, path) and ``bodies`` the JSON bodies received.
"""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from typing import Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

from loopback import LoopbackServer, QuietHandler

AK, SK, PROJECT = "AKTESTMODELARTS0001", "sk-test-secret-key-0001", "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
AUTH = re.compile(r"^SDK-HMAC-SHA256 Access=(?P<ak>[^,]+), SignedHeaders=(?P<headers>[^,]+), "
                  r"Signature=(?P<sig>[0-9a-f]{64})$")
JOBS = re.compile(r"^/v2/(?P<pid>[^/]+)/training-jobs$")
JOB = re.compile(r"^/v2/(?P<pid>[^/]+)/training-jobs/(?P<id>[^/]+)$")
ACTIONS = re.compile(r"^/v2/(?P<pid>[^/]+)/training-jobs/(?P<id>[^/]+)/actions$")
SEARCH = re.compile(r"^/v2/(?P<pid>[^/]+)/training-job-searches$")
PREVIEW = re.compile(r"^/v2/(?P<pid>[^/]+)/training-jobs/(?P<id>[^/]+)/tasks/(?P<task>[^/]+)/logs/preview$")
FLAVORS = re.compile(r"^/v2/(?P<pid>[^/]+)/training-job-flavors$")
CERT = re.compile(r"^/api/v3/projects/(?P<pid>[^/]+)/clusters/(?P<cid>[^/]+)/clustercert$")
TERMINAL = ("Completed", "Failed", "Terminated", "Abnormal")


class FakeModelArts(LoopbackServer):
    def __init__(self, preview_limit: int = 5 * 1024 * 1024):
        self.jobs: Dict[str, dict] = {}
        self.logs: Dict[Tuple[str, str], str] = {}
        self.calls: List[Tuple[str, str]] = []
        self.bodies: List[dict] = []
        self.requests: List[Tuple[str, str, Optional[dict]]] = []  # (method, path, JSON body) that passed auth
        self.clusters: Dict[str, str] = {}               # CCE cluster id -> API server URL of its kubeconfig
        self.fail_next: List[Tuple[str, str, int, str, str]] = []  # (method, path regex, status, code, msg)
        self.preview_limit = preview_limit
        self.flavors: List[dict] = []                    # GET training-job-flavors: FlavorResponse bodies
                                                         # (its flavor_type query keeps those of that type)
        self.lock = threading.RLock()
        super().__init__(self._handler())

    # -- playing the platform --------------------------------------------------------------------
    def set_phase(self, job_id: str, phase: str, secondary: Optional[str] = None, **status) -> None:
        with self.lock:
            st = self.jobs[job_id]["status"]
            st["phase"] = phase
            st["secondary_phase"] = secondary or phase
            if phase == "Running" and "start_time" not in st:
                st["start_time"] = int(time.time() * 1000)
            st.update(status)

    def log(self, job_id: str, task: str, text: str) -> None:
        with self.lock:
            self.logs[(job_id, task)] = self.logs.get((job_id, task), "") + text

    def count(self, method: str, pattern: str) -> int:
        return sum(1 for m, p in self.calls if m == method and re.search(pattern, p))

    # -- the service -----------------------------------------------------------------------------
    def _create(self, body: dict) -> dict:
        job_id = str(uuid.uuid4())
        nodes = body["spec"]["resource"].get("node_count", 1)
        algorithm = dict(body["algorithm"])
        # The response's environments are a list of mappings (the request's are one mapping).
        algorithm["environments"] = [{k: v} for k, v in (algorithm.get("environments") or {}).items()]
        job = {"kind": body.get("kind", "job"),
               "metadata": {**body["metadata"], "id": job_id, "create_time": int(time.time() * 1000),
                            "user_name": "tester", "workspace_id": body["metadata"].get("workspace_id", "0")},
               "status": {"phase": "Creating", "secondary_phase": "Creating", "duration": 0,
                          "tasks": [f"worker-{i}" for i in range(nodes)]},
               "algorithm": algorithm, "spec": body["spec"]}
        self.jobs[job_id] = job
        return job

    def _handler(self):
        fake = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, code: int, body) -> None:
                self.send_json(code, body, {"X-Request-Id": "req-" + uuid.uuid4().hex[:16]})

            def _error(self, status: int, code: str, msg: str) -> None:
                self._send(status, {"error_code": code, "error_msg": msg})

            def _route(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                with fake.lock:
                    fake.calls.append((method, path))
                    auth = AUTH.match(self.headers.get("Authorization", ""))
                    if not auth or not self.headers.get("X-Sdk-Date"):
                        return self._error(401, "APIGW.0301",
                                           "Incorrect IAM authentication information: no AK/SK signature")
                    if auth.group("ak") != AK:
                        return self._error(401, "APIGW.0301",
                                           "Incorrect IAM authentication information: unknown access key")
                    if "x-sdk-date" not in auth.group("headers").split(";"):
                        return self._error(401, "APIGW.0301", "X-Sdk-Date is not signed")
                    for i, (m, pattern, status, code, msg) in enumerate(fake.fail_next):
                        if m == method and re.search(pattern, path):
                            del fake.fail_next[i]
                            return self._error(status, code, msg)
                    body = json.loads(raw) if raw else None
                    fake.requests.append((method, path, body))
                    if body is not None:
                        fake.bodies.append(body)
                    for regex in (JOBS, JOB, ACTIONS, SEARCH, PREVIEW, FLAVORS, CERT):
                        match = regex.match(path)
                        if match:
                            break
                    else:
                        return self._error(404, "APIGW.0101",
                                           f"The API does not exist or has not been published: {path}")
                    if match.group("pid") != PROJECT:
                        return self._error(403, "ModelArts.0203", "Invalid token: the project does not match")
                    if self.headers.get("X-Project-Id") not in (PROJECT, None) and regex is not CERT:
                        return self._error(403, "ModelArts.0203", "X-Project-Id does not match the path")
                    return self._dispatch(method, regex, match, body)

            def _dispatch(self, method, regex, match, body):
                g = match.groupdict()
                if regex is FLAVORS and method == "GET":  # ?flavor_type=CPU|GPU|Ascend (none: every flavor)
                    kind = parse_qs(urlsplit(self.path).query).get("flavor_type", [None])[0]
                    if kind not in (None, "CPU", "GPU", "Ascend"):
                        return self._error(400, "ModelArts.2701", f"Invalid flavor_type: {kind}")
                    flavors = [f for f in fake.flavors if kind is None or f.get("flavor_type") == kind]
                    return self._send(200, {"total_count": len(flavors), "flavors": flavors})
                if regex is JOBS and method == "POST":
                    if not body or "metadata" not in body or "algorithm" not in body or "spec" not in body:
                        return self._error(400, "ModelArts.2701", "Invalid request body")
                    return self._send(201, fake._create(body))
                if regex is SEARCH and method == "POST":
                    items = sorted(fake.jobs.values(), key=lambda j: j["metadata"]["create_time"], reverse=True)
                    for flt in (body or {}).get("filters") or []:
                        if flt["key"] == "name" and flt["operator"] == "like":
                            items = [j for j in items if any(v in j["metadata"]["name"] for v in flt["value"])]
                    limit = (body or {}).get("limit", 10)
                    return self._send(200, {"total": len(items), "count": min(len(items), limit), "limit": limit,
                                            "offset": 0, "items": items[:limit]})
                if regex is CERT and method == "POST":
                    server = fake.clusters.get(g["cid"])
                    if server is None:
                        return self._error(404, "CCE.01404001", "The cluster does not exist")
                    return self._send(201, kubeconfig(server, (body or {}).get("duration")))
                job = fake.jobs.get(g.get("id"))
                if job is None:
                    return self._error(404, "ModelArts.2742", f"Training job {g.get('id')} not found")
                if regex is JOB and method == "GET":
                    return self._send(200, job)
                if regex is ACTIONS and method == "POST":
                    if (body or {}).get("action_type") != "terminate":
                        return self._error(400, "ModelArts.2701", "action_type must be terminate")
                    if job["status"]["phase"] in TERMINAL:
                        return self._error(400, "ModelArts.2763", "The job is already in a terminal state")
                    fake.set_phase(g["id"], "Terminated")
                    return self._send(202, job)
                if regex is PREVIEW and method == "GET":
                    if g["task"] not in job["status"]["tasks"]:
                        return self._error(404, "ModelArts.2746", f"Task {g['task']} not found")
                    data = fake.logs.get((g["id"], g["task"]), "").encode()
                    shown = data[-fake.preview_limit:]
                    return self._send(200, {"content": shown.decode(errors="replace"), "current_size": len(shown),
                                            "full_size": len(data)})
                return self._error(405, "APIGW.0101", f"{method} is not allowed here")

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_DELETE(self):
                self._route("DELETE")

        return Handler


def kubeconfig(server: str, duration) -> dict:
    """CCE's clustercert answer: a kubeconfig whose user is a client certificate."""
    return {"kind": "Config", "apiVersion": "v1", "preferences": {},
            "clusters": [{"name": "internalCluster", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "user", "user": {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}}],
            "contexts": [{"name": "internal", "context": {"cluster": "internalCluster", "user": "user"}}],
            "current-context": "internal"}
