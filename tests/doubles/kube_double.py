"""A small Kubernetes API server on 127.0.0.1 for lifecycle tests (real HTTP, real client).

It stores objects (custom resources, ConfigMaps, Secrets, Pods) as the API server would:
``metadata.uid``/``resourceVersion``/``creationTimestamp`` on create, 409 ``AlreadyExists``,
404 ``NotFound`` as ``Status`` objects, label selectors on lists, merge patches, deletes that
garbage-collect what the deleted object owns.  It checks the bearer token on every request
(``token``: the expected token, or a function that judges the ``Authorization`` header, e.g. an
EKS token's shape).

Tests play the operator: ``start_pods`` makes a job's pods (named as each operator names
them) and marks the job running, ``log`` appends lines to a pod's log (``follow=true`` streams
them), ``finish`` ends pods and sets the job's final state.  ``calls`` records every request.

``unknown_fields`` plays an older operator's CRD: ``{plural: ["spec.runtimePatches", ...]}`` are
fields its schema lacks.  A create that carries one is pruned in silence (what a structural CRD's
schema does to an unknown field), unless it asks for ``fieldValidation=Strict``: then it is
refused as kube-apiserver refuses it, 400 BadRequest with a Status whose message is the strict
decoder's (k8s.io/apiserver pkg/endpoints/handlers/create.go: a strict decoding error under the
Strict directive goes to transformDecodeError in rest.go, ``errors.NewBadRequest("<Kind> in
version \"<v>\" cannot be handled as a <Kind>: strict decoding error: unknown field \"<path>\"")``).
"""
from __future__ import annotations

import copy
import json
import os
import re
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlparse

from loopback import LoopbackServer, QuietHandler

TOKEN = "test-token-7c1e"
CUSTOM = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)(/namespaces/(?P<ns>[^/]+))?"
                    r"/(?P<plural>[^/]+)(/(?P<name>[^/]+))?(/(?P<sub>status))?$")
CORE = re.compile(r"^/api/v1(/namespaces/(?P<ns>[^/]+))?/(?P<plural>configmaps|secrets|pods)"
                  r"(/(?P<name>[^/]+))?(/(?P<sub>log|exec))?$")
KINDS = {"configmaps": "ConfigMap", "secrets": "Secret", "pods": "Pod"}


def _pop_path(obj: dict, dotted: str) -> bool:
    """Remove ``dotted`` (``spec.runtimePatches``) from ``obj``; whether it was there."""
    *parents, last = dotted.split(".")
    for key in parents:
        obj = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(obj, dict):
            return False
    return obj.pop(last, None) is not None


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge(base: dict, patch: dict) -> dict:
    for k, v in patch.items():
        if v is None:
            base.pop(k, None)
        elif isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


SET_TERM = re.compile(r"\s*([^,=\s]+)\s+in\s+\(([^)]*)\)\s*(,|$)")
EQ_TERM = re.compile(r"\s*([^,=\s]+)\s*==?\s*([^,]*?)\s*(,|$)")


def _matches(obj: dict, selector: Optional[str]) -> bool:
    """Equality (``k=v``) and set-based (``k in (a, b)``) label selector terms."""
    labels = obj.get("metadata", {}).get("labels") or {}
    rest = selector or ""
    while rest.strip():
        match = SET_TERM.match(rest) or EQ_TERM.match(rest)
        if match is None:
            raise ValueError(f"unparsable label selector {selector!r}")
        key, values = match.group(1), match.group(2)
        allowed = [v.strip() for v in values.split(",")] if match.re is SET_TERM else [values]
        if labels.get(key) not in allowed:
            return False
        rest = rest[match.end():]
    return True


class FakeKube(LoopbackServer):
    def __init__(self, token: str = TOKEN):
        self.token = token
        self.objects: Dict[Tuple[str, str, str], dict] = {}   # (api path prefix + plural, ns, name) -> object
        self.logs: Dict[Tuple[str, str], List[str]] = {}
        self.calls: List[Tuple[str, str]] = []
        self.lock = threading.RLock()
        self.fail_next: List[Tuple[str, int]] = []          # (method, status) to answer once
        # PersistentVolumeClaims as local directories: a pod's exec runs its command there (exec_in_pod)
        self.claims: Dict[Tuple[str, str], "os.PathLike"] = {}
        self.created_pod_phase = "Running"                  # the phase a pod a client creates gets
        # the API groups discovery (GET /apis) lists: the operators and Kueue a test cluster has
        self.api_groups = ["kubeflow.org", "trainer.kubeflow.org", "batch.volcano.sh", "kueue.x-k8s.io", "ray.io"]
        # fields an older operator's CRD lacks, by plural (see the module's docstring)
        self.unknown_fields: Dict[str, List[str]] = {}
        super().__init__(self._handler())

    def kubeconfig(self, path, context: str = "fake") -> str:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": self.token}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester"}}]}))
        return str(path)

    # -- what the tests look at and drive ------------------------------------------------------
    def count(self, method: str, pattern: str) -> int:
        """How many ``method`` requests ``pattern`` matches: the path with its query, or the path alone
        (``/trainjobs$`` counts the creates, which carry ``?fieldValidation=Strict``)."""
        return sum(1 for m, p in self.calls
                   if m == method and (re.search(pattern, p) or re.search(pattern, p.partition("?")[0])))

    def find(self, plural: str, ns: str, name: str) -> Optional[dict]:
        with self.lock:
            for (key, o_ns, o_name), obj in self.objects.items():
                if key.endswith("/" + plural) and o_ns == ns and o_name == name:
                    return obj
        return None

    def _job(self, ns: str, name: str) -> dict:
        with self.lock:
            for (key, o_ns, o_name), obj in self.objects.items():
                if o_ns == ns and o_name == name and key.startswith("/apis/"):
                    return obj
        raise KeyError(f"no job {ns}/{name}")

    def set_state(self, ns: str, name: str, state: str, message: str = "") -> None:
        """Kubeflow: append a true condition (the earlier ones become false); Volcano: the phase;
        TrainJob: "Running" is its child Jobs' active pods (status.jobsStatus), other states are
        conditions (Suspended, Complete, Failed) set as the Trainer controller sets them."""
        with self.lock:
            job = self._job(ns, name)
            status = job.setdefault("status", {})
            if job["apiVersion"].startswith("batch.volcano.sh"):
                status["state"] = {"phase": state, "message": message}
            elif job["kind"] == "RayJob":
                # KubeRay: "Running" (Ray job RUNNING), "Complete" (SUCCEEDED; "Complete/STOPPED" for a
                # stopped one), "Failed" (Ray job FAILED, reason AppFailed), as rayjob_controller.go sets them
                deployment, _, ray_status = state.partition("/")
                ray_status = ray_status or {"Running": "RUNNING", "Complete": "SUCCEEDED", "Failed": "FAILED"}.get(
                    deployment, "")
                status.update(jobDeploymentStatus=deployment, jobStatus=ray_status, message=message,
                              rayClusterName=f"{name}-abcde", dashboardURL=f"{name}-abcde-head-svc.{ns}.svc:8265")
                if deployment == "Failed":
                    status["reason"] = "AppFailed"
            elif job["kind"] == "TrainJob" and state == "Running":
                jobs = sorted({rj for rj, _, _ in self.trainjob_pods(job)})
                status["jobsStatus"] = [{"name": rj, "active": 1, "ready": 1, "succeeded": 0, "failed": 0,
                                         "suspended": 0} for rj in jobs]
                self._condition(status, "Suspended", "False", "Resumed", "TrainJob is resumed")
            elif job["kind"] == "TrainJob":
                self._condition(status, state, "True", {"Suspended": "Suspended", "Complete": "Completed",
                                                        "Failed": "FailedJobs"}.get(state, state), message)
                if state in ("Complete", "Failed"):
                    for js in status.get("jobsStatus") or []:
                        js.update(active=0, ready=0)
            else:
                conds = status.setdefault("conditions", [])
                for c in conds:
                    c["status"] = "False"
                conds.append({"type": state, "status": "True", "reason": "Job" + state, "message": message,
                              "lastTransitionTime": _now()})

    @staticmethod
    def _condition(status: dict, type_: str, value: str, reason: str, message: str) -> None:
        """Set one metav1.Condition (a list-map keyed by type, as meta.SetStatusCondition does)."""
        conds = [c for c in status.get("conditions") or [] if c["type"] != type_]
        conds.append({"type": type_, "status": value, "reason": reason, "message": message,
                      "lastTransitionTime": _now()})
        status["conditions"] = conds

    @staticmethod
    def trainjob_pods(job: dict) -> List[Tuple[str, int, str]]:
        """(replicated job, completion index, pod hostname) of a TrainJob's node pods, as JobSet
        makes them: one Indexed Job per replicated job, pod i named <jobset>-<rjob>-0-<i>; an MPI
        runtime's launcher is one of the numNodes (runLauncherAsNode)."""
        name, nodes = job["metadata"]["name"], job["spec"]["trainer"]["numNodes"]
        patched = [rj["name"] for p in job["spec"].get("runtimePatches") or []
                   for rj in p["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]]
        counts = [("launcher", 1), ("node", max(nodes - 1, 1))] if "launcher" in patched else [("node", nodes)]
        return [(rj, i, f"{name}-{rj}-0-{i}") for rj, count in counts for i in range(count)]

    @classmethod
    def trainjob_hostfile(cls, job: dict, slots: int = 1) -> str:
        """The hostfile the MPI plugin writes for a TrainJob on a ``runLauncherAsNode`` runtime
        (deepspeed-distributed): every node and launcher pod, ``<host>.<subdomain> slots=<n>``, in
        the runtime's replicated-job order (node, then launcher) (kubeflow/trainer
        pkg/runtime/framework/plugins/mpi/mpi.go buildHostFileConfigMap and isNode;
        plugins/jobset/jobset.go syncPodNetwork)."""
        name = job["metadata"]["name"]
        pods = sorted(cls.trainjob_pods(job), key=lambda p: (p[0] != "node", p[1]))
        return "".join(f"{host}.{name} slots={slots}\n" for _, _, host in pods)

    def pod_names(self, job: dict) -> List[Tuple[str, dict]]:
        """(pod name, pod template) of every pod the job's operator would create."""
        spec, name, out = job["spec"], job["metadata"]["name"], []
        if job["kind"] == "TrainJob":
            patches = {rj["name"]: rj["template"]["spec"]["template"] for p in spec.get("runtimePatches") or []
                       for rj in p["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]}
            for rj, index, host in self.trainjob_pods(job):
                labels = {**(patches.get(rj, {}).get("metadata") or {}).get("labels", {}),
                          "jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": rj,
                          "jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-completion-index": str(index)}
                template = {"metadata": {"labels": labels},
                            "spec": {"hostname": host, "subdomain": name, "containers": [
                                {"name": "node", "image": spec["trainer"]["image"],
                                 "command": spec["trainer"]["command"]}]}}
                out.append((f"{host}-{uuid.uuid4().hex[:5]}", template))
            return out
        if job["kind"] == "RayJob":  # KubeRay: the RayCluster <job>-<5>, its head and worker group's pods
            cluster = spec["rayClusterSpec"]
            out.append((f"{name}-abcde-head-{uuid.uuid4().hex[:5]}", cluster["headGroupSpec"]["template"]))
            for group in cluster.get("workerGroupSpecs") or []:
                out += [(f"{name}-abcde-{group['groupName']}-worker-{uuid.uuid4().hex[:5]}", group["template"])
                        for _ in range(group["replicas"])]
            return out
        if job["kind"] == "Job":  # Volcano
            for task in spec["tasks"]:
                out += [(f"{name}-{task['name']}-{i}", task["template"]) for i in range(task["replicas"])]
            return out
        replica_specs = spec.get("pytorchReplicaSpecs") or spec.get("tfReplicaSpecs") or spec.get("mpiReplicaSpecs")
        for role, rs in replica_specs.items():
            out += [(f"{name}-{role.lower()}-{i}", rs["template"]) for i in range(rs.get("replicas", 1))]
        return out

    def start_pods(self, ns: str, name: str) -> List[str]:
        with self.lock:
            job = self._job(ns, name)
            names = []
            for pod_name, template in self.pod_names(job):
                pod = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": pod_name, "namespace": ns,
                                    "labels": dict(template["metadata"].get("labels") or {}),
                                    "ownerReferences": [{"apiVersion": job["apiVersion"], "kind": job["kind"],
                                                         "name": name, "uid": job["metadata"]["uid"]}]},
                       "spec": copy.deepcopy(template["spec"]), "status": {"phase": "Running"}}
                self._store("/api/v1/pods", ns, pod)
                self.logs.setdefault((ns, pod_name), [])
                names.append(pod_name)
            self.set_state(ns, name, "Running")
            return names

    def log(self, ns: str, pod: str, *lines: str) -> None:
        with self.lock:
            self.logs.setdefault((ns, pod), []).extend(lines)

    def finish(self, ns: str, name: str, state: str, exit_codes: Optional[Dict[str, int]] = None,
               message: str = "") -> None:
        with self.lock:
            for (key, o_ns, _), pod in self.objects.items():
                owners = pod["metadata"].get("ownerReferences") or []
                if key == "/api/v1/pods" and o_ns == ns and any(o["name"] == name for o in owners):
                    code = (exit_codes or {}).get(pod["metadata"]["name"], 0)
                    pod["status"] = {"phase": "Failed" if code else "Succeeded", "containerStatuses": [
                        {"name": pod["spec"]["containers"][0]["name"], "image": pod["spec"]["containers"][0]["image"],
                         "imageID": "", "ready": False, "restartCount": 0,
                         "state": {"terminated": {"exitCode": code, "reason": "Error" if code else "Completed"}}}]}
            self.set_state(ns, name, state, message)

    # -- the API -------------------------------------------------------------------------------
    def _store(self, key: str, ns: str, obj: dict) -> dict:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", ns)
        meta["uid"] = str(uuid.uuid4())
        meta["resourceVersion"] = str(int(time.time() * 1000))
        meta["creationTimestamp"] = _now()
        self.objects[(key, ns, meta["name"])] = obj
        return obj

    def _delete(self, key: str, ns: str, name: str) -> Optional[dict]:
        obj = self.objects.pop((key, ns, name), None)
        if obj is not None:
            uid = obj["metadata"]["uid"]
            for k in [k for k, o in self.objects.items()
                      if any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences") or [])]:
                self._delete(*k)
        return obj

    def _handler(self):
        fake = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.0"

            def _status(self, code: int, reason: str, message: str) -> None:
                self.send_json(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": message, "reason": reason, "code": code})

            def _body(self):
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"null") if length else None

            def _route(self, method: str) -> None:
                url = urlparse(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                fake.calls.append((method, url.path + ("?" + url.query if url.query else "")))
                auth = self.headers.get("Authorization") or ""
                if not (fake.token(auth) if callable(fake.token) else auth == "Bearer " + fake.token):
                    return self._status(401, "Unauthorized", "Unauthorized")
                for i, (m, code) in enumerate(fake.fail_next):
                    if m == method:
                        fake.fail_next.pop(i)
                        return self._status(code, "InternalError", "injected failure")
                if method == "GET" and url.path.rstrip("/") == "/apis":
                    return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                        {"name": g, "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
                         "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"}} for g in fake.api_groups]})
                match = CUSTOM.match(url.path) or CORE.match(url.path)
                if not match:
                    return self._status(404, "NotFound", f"the server could not find the requested resource {url.path}")
                g = match.groupdict()
                if url.path.startswith("/apis/"):
                    key = f"/apis/{g['group']}/{g['version']}/{g['plural']}"
                    kind = None
                else:
                    key, kind = f"/api/v1/{g['plural']}", KINDS[g["plural"]]
                ns, name, sub = g.get("ns"), g.get("name"), g.get("sub")
                if sub == "log":
                    return self._log(ns, name, query)
                if sub == "exec":
                    return exec_in_pod(self, fake, ns, name, parse_qs(url.query).get("command", []))
                with fake.lock:
                    if method == "GET" and not name:
                        items = [copy.deepcopy(o) for (k, o_ns, _), o in sorted(fake.objects.items())
                                 if k == key and (ns is None or o_ns == ns) and _matches(o, query.get("labelSelector"))]
                        return self.send_json(200, {"apiVersion": "v1", "kind": (kind or "") + "List",
                                                "metadata": {"resourceVersion": "1"}, "items": items})
                    current = fake.objects.get((key, ns, name)) if name else None
                    if method == "POST":
                        body = self._body()
                        if "name" not in body["metadata"] and body["metadata"].get("generateName"):
                            body["metadata"]["name"] = body["metadata"]["generateName"] + uuid.uuid4().hex[:5]
                        if (key, ns, body["metadata"]["name"]) in fake.objects:
                            return self._status(409, "AlreadyExists",
                                                f"{g['plural']} \"{body['metadata']['name']}\" already exists")
                        unknown = [f for f in fake.unknown_fields.get(g["plural"], [])
                                   if _pop_path(copy.deepcopy(body), f)]
                        if unknown and query.get("fieldValidation") == "Strict":
                            return self._status(400, "BadRequest", "%s in version \"%s\" cannot be handled as a %s: "
                                                "strict decoding error: %s" % (
                                                    body.get("kind"), g["version"], body.get("kind"),
                                                    ", ".join('unknown field "%s"' % f for f in unknown)))
                        for dotted in unknown:  # pruned in silence, as a structural schema does
                            _pop_path(body, dotted)
                        if kind == "Pod" and not body.get("status"):
                            body["status"] = {"phase": fake.created_pod_phase}
                        return self.send_json(201, copy.deepcopy(fake._store(key, ns, body)))
                    if current is None:
                        return self._status(404, "NotFound", f"{g['plural']} \"{name}\" not found")
                    if method == "GET":
                        return self.send_json(200, copy.deepcopy(current))
                    if method == "PUT":
                        body = self._body()
                        body["metadata"] = {**body["metadata"], "uid": current["metadata"]["uid"],
                                            "creationTimestamp": current["metadata"]["creationTimestamp"]}
                        fake.objects[(key, ns, name)] = body
                        return self.send_json(200, copy.deepcopy(body))
                    if method == "PATCH":
                        return self.send_json(200, copy.deepcopy(_merge(current, self._body() or {})))
                    if method == "DELETE":
                        body = self._body() or {}
                        current.setdefault("metadata", {})["deletionPropagation"] = body.get("propagationPolicy")
                        fake._delete(key, ns, name)
                        return self.send_json(200, {"kind": "Status", "apiVersion": "v1", "status": "Success",
                                                "details": {"name": name, "kind": g["plural"]}})
                return self._status(405, "MethodNotAllowed", method)

            def _log(self, ns: str, name: str, query: dict) -> None:
                if (ns, name) not in fake.logs:
                    return self._status(404, "NotFound", f"pods \"{name}\" not found")
                follow = query.get("follow") == "true"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                sent = 0
                while True:
                    with fake.lock:
                        lines = list(fake.logs.get((ns, name), []))
                        pod = fake.objects.get(("/api/v1/pods", ns, name))
                        done = pod is None or pod["status"].get("phase") in ("Succeeded", "Failed")
                    for line in lines[sent:]:
                        self.wfile.write((line + "\n").encode())
                    self.wfile.flush()
                    sent = len(lines)
                    if not follow or done:
                        return
                    time.sleep(0.05)

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_PUT(self):
                self._route("PUT")

            def do_PATCH(self):
                self._route("PATCH")

            def do_DELETE(self):
                self._route("DELETE")

        return Handler


# -- exec: the kubelet's websocket stream (v4.channel.k8s.io), the command run on this machine -------
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _ws_frame(payload: bytes, opcode: int = 0x2) -> bytes:
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + n.to_bytes(2, "big")
    else:
        head += bytes([127]) + n.to_bytes(8, "big")
    return head + payload


def exec_in_pod(handler, fake: "FakeKube", ns: str, name: str, command: List[str]) -> None:
    """``pods/<name>/exec`` as the kubelet answers it: a websocket whose binary messages start with
    the channel (1 stdout, 2 stderr, 3 the final Status).  The command really runs here, in the
    local directory of the claim the pod's container mounts at its workingDir (``fake.claims``),
    under the mount's subPath: the files a pod would see."""
    import base64
    import hashlib
    import os
    import subprocess
    with fake.lock:
        pod = copy.deepcopy(fake.objects.get(("/api/v1/pods", ns, name)))
    if pod is None:
        return handler._status(404, "NotFound", f"pods \"{name}\" not found")
    spec = pod["spec"]
    container = spec["containers"][0]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes", [])
              if "persistentVolumeClaim" in v}
    mount = next((m for m in container.get("volumeMounts", []) if m["mountPath"] == container.get("workingDir")
                  and m["name"] in claims), None)
    # no claim at its working directory (a job's node pod): the command runs in a directory of its own
    scratch = tempfile.TemporaryDirectory(prefix="kube-double-exec-") if mount is None else None
    cwd = scratch.name if scratch is not None else \
        os.path.join(str(fake.claims[(ns, claims[mount["name"]])]), mount.get("subPath", ""))
    accept = base64.b64encode(hashlib.sha1((handler.headers["Sec-WebSocket-Key"] + WS_GUID).encode()).digest())
    handler.send_response(101)
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept.decode())
    handler.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
    handler.end_headers()
    if not os.path.isdir(cwd):  # the kubelet cannot start a container whose workingDir is missing
        proc = subprocess.CompletedProcess(command, 128, b"", b"no such directory\n")
    else:
        try:
            proc = subprocess.run(command, cwd=cwd, capture_output=True)
        finally:
            if scratch is not None:
                scratch.cleanup()
    for channel, data in ((1, proc.stdout), (2, proc.stderr)):
        for i in range(0, len(data), 1 << 16):
            handler.wfile.write(_ws_frame(bytes([channel]) + data[i:i + (1 << 16)]))
    status = {"metadata": {}, "status": "Success"} if proc.returncode == 0 else {
        "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(proc.returncode)}]}}
    handler.wfile.write(_ws_frame(b"\x03" + json.dumps(status).encode()))
    handler.wfile.write(_ws_frame(b"\x03\xe8", opcode=0x8))
    handler.wfile.flush()
