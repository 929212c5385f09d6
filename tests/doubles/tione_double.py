"""A fake TI-ONE API (2021-11-11) on 127.0.0.1 for the real SDK client, in a thread.

Routes on ``X-TC-Action``; answers as TI-ONE does (HTTP 200, ``Content-Type: application/json``,
``{"Response": {..., "RequestId"}}``, errors in ``Response.Error``).  Every request must carry a
well-formed TC3-HMAC-SHA256 ``Authorization`` header whose signature verifies with the test
secret key (checked here with an independent implementation of the algorithm), and its body
must load into the action's SDK request model without an unknown-field warning.

State: tasks walk through a status script (one step per DescribeTrainingTask), get pods once
they leave PENDING, and show log lines once they reach a given status; DescribeLogs pages with
a Context cursor; errors can be injected per action.
"""
from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
import threading
import uuid
import warnings
from datetime import datetime, timedelta, timezone
from typing import Dict, List, Optional

from loopback import LoopbackServer, QuietHandler

SECRET_ID, SECRET_KEY = "AKIDcloudtraintest0000000000000000", "cloudtrain-test-secret-key-00000000"
AUTH = re.compile(r"^TC3-HMAC-SHA256 Credential=(?P<id>[A-Za-z0-9]+)/(?P<date>\d{4}-\d{2}-\d{2})/tione/tc3_request, "
                  r"SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<sig>[0-9a-f]{64})$")
SCRIPT = ["SUBMITTING", "PENDING", "STARTING", "RUNNING", "SUCCEED"]
BASE_TIME = datetime(2025, 11, 20, 8, 0, 0, tzinfo=timezone.utc)
# what TrainingTaskDetail echoes of the CreateTrainingTask request (fields of both SDK models;
# TrainingTaskSetItem, a list's item, lacks DataSource and DataConfigs)
ECHOED = ("CodePackagePath", "DataConfigs", "DataSource", "Output")


def rfc3339(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def tc3_signature(secret_key: str, date: str, timestamp: str, method: str, body: bytes,
                  content_type: str, host: str) -> str:
    canonical = "\n".join([method, "/", "", f"content-type:{content_type}\nhost:{host}\n", "content-type;host",
                           hashlib.sha256(body).hexdigest()])
    to_sign = "\n".join(["TC3-HMAC-SHA256", timestamp, f"{date}/tione/tc3_request",
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("TC3" + secret_key).encode()
    for part in (date, "tione", "tc3_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


class FakeTione(LoopbackServer):
    poll_interval = 0.02

    def __init__(self):
        self.lock = threading.Lock()
        self.tasks: Dict[str, dict] = {}
        self.calls: List[dict] = []  # {"action", "body", "headers"}
        self.errors: Dict[str, List[tuple]] = {}  # action -> [(code, message), ...] (one per call)
        self.logs: Dict[str, List[dict]] = {}  # task id -> [{"pod", "message", "when", "id"}]
        self.contexts: Dict[str, int] = {}  # Context token -> offset
        self.bad_requests: List[str] = []
        self._ids = itertools.count(1)
        self.billing_specs: List[dict] = []  # DescribeBillingSpecs' Specs (Spec models' fields)
        super().__init__(self._handler())

    def actions(self) -> List[str]:
        return [c["action"] for c in self.calls]

    def bodies(self, action: str) -> List[dict]:
        return [c["body"] for c in self.calls if c["action"] == action]

    # -- scripting ---------------------------------------------------------------------------
    def add_task(self, name: str, *, script=None, tags=None, failure: str = "", nodes: int = 2,
                 charge_status: str = "BILLING", pods: Optional[List[str]] = None) -> str:
        task_id = "train-%d" % (1282671078021627392 + next(self._ids))
        self.tasks[task_id] = {
            "Id": task_id, "Name": name, "step": 0, "script": list(script or SCRIPT), "FailureReason": failure,
            "Tags": [{"TagKey": k, "TagValue": v} for k, v in (tags or {}).items()],
            "ResourceConfigInfos": [{"Role": "WORKER", "InstanceNum": nodes}], "ChargeStatus": charge_status,
            "pods": pods or [f"{task_id}-7an39bddmfpc-launcher", f"{task_id}-7an39bddmfpc-worker-0"],
            "CreateTime": rfc3339(BASE_TIME),
        }
        self.logs.setdefault(task_id, [])
        return task_id

    def add_log(self, task_id: str, pod_index: int, message: str, when: str = "RUNNING", seconds: int = 0) -> None:
        task = self.tasks[task_id]
        self.logs[task_id].append({"pod": task["pods"][pod_index], "message": message, "when": when,
                                   "time": BASE_TIME + timedelta(seconds=60 + seconds),
                                   "id": uuid.uuid4().hex})

    def fail(self, action: str, code: str, message: str, times: int = 1) -> None:
        self.errors.setdefault(action, []).extend([(code, message)] * times)

    def status_of(self, task: dict) -> str:
        return task["script"][min(task["step"], len(task["script"]) - 1)]

    def reached(self, task: dict, status: str) -> bool:
        script = task["script"]
        return status in script and script.index(status) <= min(task["step"], len(script) - 1)

    # -- actions -----------------------------------------------------------------------------
    def _detail(self, task: dict) -> dict:
        status = self.status_of(task)
        started = self.reached(task, "STARTING") or self.reached(task, "RUNNING")
        detail = {k: task[k] for k in ("Id", "Name", "Tags", "ResourceConfigInfos", "ChargeStatus", "CreateTime")}
        detail.update({"Status": status,
                       "FailureReason": task["FailureReason"] if status in ("FAILED", "SUBMIT_FAILED") else "",
                       "Message": "", "TrainingMode": "DDP"})
        if started:
            detail["StartTime"] = rfc3339(BASE_TIME + timedelta(seconds=30))
            detail["LatestInstanceId"] = task["Id"] + "-1"
        if status in ("SUCCEED", "FAILED", "STOPPED"):
            detail["EndTime"] = rfc3339(BASE_TIME + timedelta(minutes=10))
        return detail

    def CreateTrainingTask(self, body: dict) -> dict:
        tags = {t["TagKey"]: t["TagValue"] for t in body.get("Tags", [])}
        task_id = self.add_task(body["Name"], tags=tags,
                                nodes=sum(r["InstanceNum"] for r in body["ResourceConfigInfos"]))
        self.tasks[task_id].update({k: body[k] for k in ECHOED if k in body})
        return {"Id": task_id}

    def DescribeTrainingTask(self, body: dict) -> dict:
        task = self._task(body["Id"])
        detail = self._detail(task)
        detail.update({k: task[k] for k in ECHOED if k in task})  # the task's config, as created
        task["step"] += 1
        return {"TrainingTaskDetail": detail}

    def DescribeTrainingTasks(self, body: dict) -> dict:
        items = list(self.tasks.values())
        for f in body.get("Filters") or []:
            items = [t for t in items if str(t.get(f["Name"])) in f["Values"]]
        for f in body.get("TagFilters") or []:
            items = [t for t in items
                     if any(tag["TagKey"] == f["TagKey"] and tag["TagValue"] in f["TagValues"] for tag in t["Tags"])]
        offset, limit = body.get("Offset", 0), min(body.get("Limit", 10), 50)
        page = items[offset:offset + limit]
        listed = [{k: v for k, v in self._detail(t).items() if k != "LatestInstanceId"} for t in page]
        return {"TrainingTaskSet": listed, "TotalCount": len(items)}

    def StopTrainingTask(self, body: dict) -> dict:
        task = self._task(body["Id"])
        status = self.status_of(task)
        if status in ("SUCCEED", "FAILED", "STOPPED", "SUBMIT_FAILED"):
            raise FakeError("FailedOperation.StopTaskFailed", f"task {task['Id']} is {status}")
        task["script"] = task["script"][:task["step"]] + ["STOPPING", "STOPPED"]
        task["step"] = min(task["step"], len(task["script"]) - 2)
        return {}

    def DescribeTrainingTaskPods(self, body: dict) -> dict:
        task = self._task(body["Id"])
        pods = task["pods"] if self.reached(task, "STARTING") or self.reached(task, "RUNNING") else []
        return {"PodNames": pods, "TotalCount": len(pods),
                "PodInfoList": [{"Name": p, "IP": "10.0.0.%d" % (i + 2), "Status": "RUNNING"}
                                for i, p in enumerate(pods)]}

    def DescribeLogs(self, body: dict) -> dict:
        if body.get("Service") != "TRAIN":
            raise FakeError("InvalidParameterValue", "Service must be TRAIN")
        task_id = body["ServiceId"].rsplit("-", 1)[0]
        task = self._task(task_id)
        if body["ServiceId"] != task["Id"] + "-1":
            raise FakeError("InvalidParameterValue", "ServiceId is not the task's LatestInstanceId")
        since = datetime.fromisoformat(body["StartTime"].replace("Z", "+00:00")) if body.get("StartTime") else None
        entries = [e for e in self.logs.get(task_id, [])
                   if e["pod"] == body.get("PodName") and self.reached(task, e["when"])
                   and (since is None or e["time"] >= since)]
        entries.sort(key=lambda e: e["time"])
        offset = 0
        if body.get("Context"):
            if body["Context"] not in self.contexts:
                raise FakeError("InvalidParameterValue.Context", "unknown Context")
            offset = self.contexts[body["Context"]]
        limit = min(body.get("Limit", 100), 1000)
        page = entries[offset:offset + limit]
        context = ""
        if offset + limit < len(entries):
            context = uuid.uuid4().hex
            self.contexts[context] = offset + limit
        return {"Context": context, "Content": [
            {"Id": e["id"], "Message": e["message"], "PodName": e["pod"], "Timestamp": rfc3339(e["time"])}
            for e in page]}

    def DescribeBillingSpecs(self, body: dict) -> dict:
        if body.get("ChargeType") not in ("POSTPAID_BY_HOUR", "PREPAID"):
            raise FakeError("MissingParameter", "ChargeType must be POSTPAID_BY_HOUR or PREPAID")
        return {"Specs": [dict(s) for s in self.billing_specs]}

    def _task(self, task_id: str) -> dict:
        if task_id not in self.tasks:
            raise FakeError("ResourceNotFound", f"training task {task_id} does not exist")
        return self.tasks[task_id]

    # -- HTTP ----------------------------------------------------------------------------------
    def check_request(self, headers, body: bytes) -> Optional[str]:
        """What is wrong with a request (None: nothing)."""
        if headers.get("X-TC-Version") != "2021-11-11":
            return "X-TC-Version is not 2021-11-11"
        if headers.get("Content-Type") != "application/json":
            return "Content-Type is not application/json"
        m = AUTH.match(headers.get("Authorization", ""))
        if not m:
            return "Authorization is not a TC3-HMAC-SHA256 header"
        if m.group("id") != SECRET_ID or m.group("signed") != "content-type;host":
            return "Authorization names the wrong SecretId or signed headers"
        timestamp = headers.get("X-TC-Timestamp", "")
        if (not timestamp.isdigit()
                or datetime.fromtimestamp(int(timestamp), timezone.utc).strftime("%Y-%m-%d") != m.group("date")):
            return "the credential date does not match X-TC-Timestamp"
        want = tc3_signature(SECRET_KEY, m.group("date"), timestamp, "POST", body, headers["Content-Type"],
                             headers["Host"])
        if not hmac.compare_digest(want, m.group("sig")):
            return "the TC3 signature does not verify"
        return None

    def _handler(self):
        fake = self

        class Handler(QuietHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                action = self.headers.get("X-TC-Action", "")
                request_id = str(uuid.uuid4())
                with fake.lock:
                    problem = fake.check_request(self.headers, body)
                    params = json.loads(body or b"{}")
                    fake.calls.append({"action": action, "body": params, "headers": dict(self.headers)})
                    try:
                        if problem:
                            raise FakeError("AuthFailure.SignatureFailure", problem)
                        model_problem = validate_model(action, params)
                        if model_problem:
                            fake.bad_requests.append(model_problem)
                            raise FakeError("InvalidParameter", model_problem)
                        queued = fake.errors.get(action)
                        if queued:
                            raise FakeError(*queued.pop(0))
                        handler = getattr(fake, action, None)
                        if handler is None:
                            raise FakeError("InvalidAction", f"action {action} does not exist")
                        response = dict(handler(params), RequestId=request_id)
                        model_problem = validate_model(action, response, "Response")
                        if model_problem:  # the fake itself must answer in the SDK's shapes
                            fake.bad_requests.append(model_problem)
                    except FakeError as exc:
                        response = {"Error": {"Code": exc.code, "Message": exc.message}, "RequestId": request_id}
                self.send_json(200, {"Response": response})  # Content-Type exactly application/json: the SDK checks it

        return Handler


class FakeError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(code)
        self.code, self.message = code, message


def validate_model(action: str, params: dict, kind: str = "Request") -> Optional[str]:
    """Load a request body (or a response) into the SDK's model for the action, unknown fields
    as errors."""
    from tencentcloud.tione.v20211111 import models
    cls = getattr(models, f"{action}{kind}", None)
    if cls is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            cls()._deserialize(params)
        except Exception as exc:  # the SDK's "<Key> fileds are useless" warning, raised
            return f"{action}{kind}: {exc}"
    return None
