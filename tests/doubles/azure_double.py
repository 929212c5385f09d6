"""A small fake of the Azure services ``MLClient`` talks to, on 127.0.0.1.

- ``FakeAzure``: the state (jobs, code and environment versions, computes, blobs, run logs) and
  one router for every request; it records each request and checks what it must (the job body
  ``jobs.create_or_update`` PUTs, the bearer token, https).
- ``FakeAzure.start()`` serves it with ``http.server`` in a thread.
- ``LoopbackTransport``: an azure-core ``HttpTransport`` (requests) that sends every request
  MLClient makes -- ARM (management.azure.com), the workspace's discovery and run-history hosts,
  log downloads -- to that server instead, with the original host in a header.  The network is
  replaced at the transport; MLClient, its pipelines, policies and (de)serialisers are real.
- The code upload goes through azure-storage-blob's own client, which takes no transport from
  MLClient: the fake's ``startPendingUpload`` answer (the service's real mechanism for telling
  the SDK where to upload) hands out a SAS URL on the same loopback server, so the blob calls
  (get properties, put blob, set metadata) are real HTTP too.

- ``jobs.download`` (``cloudtrain outputs``): the run's named outputs (run history ``rundata``),
  their datastore URIs (the data plane's ``batchGetResolvedUris``), the datastore and its SAS token
  (ARM ``datastores/NAME`` and ``listSecrets``), then azure-storage-blob lists and fetches the blobs
  at ``https://fakestore.blob.core.windows.net``, a client the SDK builds itself with no transport
  to lend.  It reaches the fake the way a client behind a proxy does: ``HTTPS_PROXY`` names this
  server, which answers ``CONNECT`` and speaks TLS with a certificate for ``*.blob.core.windows.net``
  issued by a test CA (``tls_files``) that ``REQUESTS_CA_BUNDLE`` trusts (``proxy_env``).

Used in-process by the tests, and from a ``cloudtrain`` subprocess through ``doubles.azure_loopback``
(``CT_AZURE_FAKE_PORT``), which is why the state lives behind HTTP and not in the test's memory.
"""
from __future__ import annotations

import datetime
import json
import re
import socketserver
import ssl
import tempfile
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional
from urllib.parse import parse_qs, urlsplit

from azure.core.pipeline.transport import RequestsTransport

ORIGINAL_HOST = "X-Fake-Original-Host"
ARM = "management.azure.com"
API = "fakeregion.api.azureml.ms"
LOGS = "fakelogs.blob.core.windows.net"
STORE = "fakestore"  # blob "account" on the loopback server (path-style, like Azurite)
STORE_HOST = f"{STORE}.blob.core.windows.net"  # the same account, reached through the proxy (CONNECT + TLS)
WORKSPACE_ID = "11111111-1111-1111-1111-111111111111"
WS = re.compile(r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/"
                r"Microsoft\.MachineLearningServices/workspaces/(?P<ws>[^/]+)(?P<rest>/.*)?$", re.I)


class LoopbackTransport(RequestsTransport):
    """Sends every request to the fake on 127.0.0.1:``port``, keeping the original host."""

    def __init__(self, port: int, **kwargs):
        super().__init__(**kwargs)
        self.port = port

    def send(self, request, **kwargs):
        # The request object is the pipeline's: a retry sends it again through the bearer-token
        # policy, which refuses an http URL.  So the loopback URL is only lent to this one send.
        original = request.url
        parts = urlsplit(original)
        if parts.hostname not in ("127.0.0.1", "localhost"):
            assert parts.scheme == "https", f"MLClient must use https, got {original}"
            request.headers[ORIGINAL_HOST] = parts.hostname
            request.url = f"http://127.0.0.1:{self.port}{parts.path}" + (f"?{parts.query}" if parts.query else "")
        kwargs.pop("connection_verify", None)
        try:
            return super().send(request, **kwargs)
        finally:
            request.url = original


class FakeCredential:
    """A TokenCredential: MLClient's bearer-token policy asks it for a token."""

    token = "fake-token-for-tests"

    def get_token(self, *scopes, **kwargs):
        from azure.core.credentials import AccessToken
        return AccessToken(self.token, int(time.time()) + 3600)

    def get_token_info(self, *scopes, **kwargs):
        from azure.core.credentials import AccessTokenInfo
        return AccessTokenInfo(self.token, int(time.time()) + 3600)


_TLS: Dict[str, str] = {}


def tls_files() -> Dict[str, str]:
    """A test CA (``ca``, for REQUESTS_CA_BUNDLE) and a certificate it issued for
    ``*.blob.core.windows.net`` (``cert``, ``key``), made once per process."""
    if _TLS:
        return _TLS
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def issue(subject, key, issuer, issuer_key, ca):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                  critical=False))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                            critical=True)
        else:
            builder = (builder.add_extension(x509.SubjectAlternativeName([x509.DNSName("*.blob.core.windows.net")]),
                                             critical=False)
                       .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cloudtrain test CA")])
    ca = issue(ca_name, ca_key, ca_name, ca_key, True)
    leaf = issue(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "*.blob.core.windows.net")]), key, ca_name, ca_key,
                 False)
    folder = tempfile.mkdtemp(prefix="ct-azure-tls-")
    files = {"ca": f"{folder}/ca.pem", "cert": f"{folder}/cert.pem", "key": f"{folder}/key.pem"}
    pem = serialization.Encoding.PEM
    with open(files["ca"], "wb") as f:
        f.write(ca.public_bytes(pem))
    with open(files["cert"], "wb") as f:
        f.write(leaf.public_bytes(pem))
    with open(files["key"], "wb") as f:
        f.write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    _TLS.update(files)
    return _TLS


class FakeAzure:
    def __init__(self, subscription: str = "00000000-0000-0000-0000-000000000000", resource_group: str = "rg",
                 workspace: str = "ws"):
        self.scope = (subscription, resource_group, workspace)
        self.lock = threading.Lock()
        self.requests: List[dict] = []
        self.jobs: Dict[str, dict] = {}
        self.codes: Dict[str, dict] = {}
        self.environments: Dict[str, dict] = {}
        self.computes: Dict[str, str] = {"gpu-cluster": "Standard_NC24rs_v3", "v100-no-ib": "Standard_NC24s_v3",
                                         "a100-cluster": "Standard_ND96asr_v4", "spot-cluster": "Standard_ND96asr_v4"}
        # AmlCompute vmPriority (REST), "Dedicated" unless named here
        self.priorities: Dict[str, str] = {"spot-cluster": "LowPriority"}
        self.blobs: Dict[str, dict] = {}  # "container/blob name" -> {"data", "metadata"}
        self.datastores: Dict[str, str] = {"workspaceblobstore": "azureml-blobstore", "runs": "runs"}  # -> container
        self.run_errors: Dict[str, dict] = {}  # job name -> run history's RootError of a failed run
        self.logs: Dict[str, Dict[str, str]] = {}
        # per job: statuses the run-history "details" call steps through, and log text added at each step
        self.script: Dict[str, List[tuple]] = {}
        self.default_script: List[tuple] = []  # the script of every job created from now on
        # (method, path substring) -> (HTTP status, error code, message): answer with that error
        self.failures: Dict[tuple, tuple] = {}
        # (method, path substring) -> how many more times to answer 503 (a transient error the SDK retries)
        self.transient: Dict[tuple, int] = {}
        self.crashes: List[str] = []  # tracebacks of requests the fake itself failed on
        self.port: Optional[int] = None
        self._server = None

    # -- serving ----------------------------------------------------------------------------
    def start(self) -> "FakeAzure":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                try:
                    status, headers, payload = fake.handle(self.command, self.path, dict(self.headers), body)
                except Exception:  # a bug in the fake: answer, and make the test fail at teardown
                    fake.crashes.append(traceback.format_exc())
                    status, headers, payload = fake._error(500, "FakeAzureCrashed", "the fake crashed")
                self.send_response(status)
                headers.setdefault("Content-Length", str(len(payload)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = do_PATCH = _serve

            def do_CONNECT(self):
                """A proxy's tunnel to STORE_HOST:443, ended here: TLS with the test CA's certificate,
                then the requests inside it are served like the others."""
                host = self.path.rpartition(":")[0]
                if host != STORE_HOST:
                    self.send_error(403, f"the fake proxies {STORE_HOST} only")
                    return
                self.send_response(200, "Connection Established")
                self.end_headers()
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(tls_files()["cert"], tls_files()["key"])
                self.connection = context.wrap_socket(self.connection, server_side=True)
                self.rfile = self.connection.makefile("rb")
                self.wfile = socketserver._SocketWriter(self.connection)
                self.headers_host = host
                self.close_connection = False  # http.client tunnels with an HTTP/1.0 CONNECT: keep serving

            def parse_request(self):
                ok = super().parse_request()
                if ok and getattr(self, "headers_host", None):  # inside a tunnel: the host it was opened to
                    self.headers[ORIGINAL_HOST] = self.headers_host
                return ok

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def transport(self) -> LoopbackTransport:
        return LoopbackTransport(self.port)

    def proxy_env(self) -> Dict[str, str]:
        """What a client behind this proxy sets: the blob clients the SDK builds itself use it."""
        return {"HTTPS_PROXY": f"http://127.0.0.1:{self.port}", "REQUESTS_CA_BUNDLE": tls_files()["ca"],
                "NO_PROXY": ""}

    # -- routing ----------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, headers: Dict[str, str], body: bytes):
        parts = urlsplit(raw_path)
        host = headers.get(ORIGINAL_HOST) or headers.get(ORIGINAL_HOST.lower()) or "127.0.0.1"
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        record = {"method": method, "host": host, "path": parts.path, "query": query,
                  "auth": headers.get("Authorization") or headers.get("authorization"),
                  "body": json.loads(body) if body[:1] in (b"{", b"[") else None}
        with self.lock:
            self.requests.append(record)
            try:
                if host == "127.0.0.1":
                    return self._blob(method, parts.path, query, headers, body)
                if host == STORE_HOST:  # virtual-host style, through the proxy's tunnel
                    return self._blob(method, f"/{STORE}{parts.path}", query, headers, body)
                if host == ARM or (host == API and parts.path != "/discovery"):  # discovery is anonymous
                    assert record["auth"] == f"Bearer {FakeCredential.token}", f"no bearer token on {raw_path}"
                for (method_, part), left in self.transient.items():
                    if left and method == method_ and part in parts.path:
                        self.transient[(method_, part)] = left - 1
                        return self._error(503, "ServiceUnavailable", "transient, try again")
                for (method_, part), (status, code, message) in self.failures.items():
                    if method == method_ and part in parts.path:
                        return self._error(status, code, message)
                if host == LOGS:
                    return self._log_file(parts.path)
                if host == API and parts.path == "/discovery":
                    return self._json(200, {"api": f"https://{API}", "history": f"https://{API}"})
                path = re.sub(r"^/(history|data)/v1\.0(?=/)", "", parts.path)
                match = WS.match(path)
                if not match or tuple(match.group("sub", "rg", "ws")) != self.scope:
                    return self._error(404, "ResourceNotFound", f"no such resource {parts.path}")
                rest = match.group("rest") or ""
                base = path[:match.start("rest")] if match.group("rest") else path
                if host == API and rest == "/dataversion/batchGetResolvedUris":
                    return self._resolve_data(record["body"])
                if host == API and rest == "/rundata":
                    return self._run_data(record["body"])
                if host == API:
                    return self._history(method, rest)
                return self._arm(method, base, rest, query, record["body"])
            except AssertionError as exc:
                return self._error(400, "FakeAzureAssertion", str(exc))

    @staticmethod
    def _json(status: int, payload, headers: Optional[dict] = None):
        out = {"Content-Type": "application/json", "x-ms-request-id": str(uuid.uuid4())}
        out.update(headers or {})
        return status, out, json.dumps(payload).encode()

    def _error(self, status: int, code: str, message: str):
        return self._json(status, {"error": {"code": code, "message": message}},
                          {"x-ms-request-id": "fake-request-0001"})

    # -- ARM: workspace, jobs, codes, environments, computes ----------------------------------
    def _arm(self, method: str, base: str, rest: str, query: dict, body):
        if rest == "":
            return self._json(200, {"id": base, "name": self.scope[2], "location": "westeurope",
                                    "properties": {"discoveryUrl": f"https://{API}/discovery",
                                                   "workspaceId": "11111111-1111-1111-1111-111111111111"}})
        m = re.match(r"^/computes/([^/]+)$", rest)
        if m:
            size = self.computes.get(m.group(1))
            if size is None:
                return self._error(404, "ResourceNotFound", f"compute {m.group(1)} not found")
            return self._json(200, {"id": base + rest, "name": m.group(1), "location": "westeurope",
                                    "properties": {"computeType": "AmlCompute", "provisioningState": "Succeeded",
                                                   "properties": {"vmSize": size,
                                                                  "vmPriority": self.priorities.get(m.group(1),
                                                                                                    "Dedicated"),
                                                                  "scaleSettings": {"maxNodeCount": 4,
                                                                                    "minNodeCount": 0}}}})
        m = re.match(r"^/codes/([^/]+)/versions(?:/([^/]+))?(/startPendingUpload)?$", rest)
        if m:
            return self._code(method, base + rest, m.group(1), m.group(2), bool(m.group(3)), query, body)
        m = re.match(r"^/environments/([^/]+)/versions/([^/]+)$", rest)
        if m:
            key = f"{m.group(1)}:{m.group(2)}"
            if method == "PUT":
                self.environments[key] = dict(body, id=base + rest, name=m.group(2))
            if key not in self.environments:
                return self._error(404, "ResourceNotFound", f"environment {key} not found")
            return self._json(200, self.environments[key])
        if rest == "/datastores":  # list; jobs.download asks for the default one (isDefault=true)
            names = [n for n in self.datastores if query.get("isDefault") != "true" or n == "workspaceblobstore"]
            return self._json(200, {"value": [json.loads(self._datastore(f"{base}/datastores/{n}", n, False)[2])
                                              for n in names]})
        m = re.match(r"^/datastores/([^/]+)(/listSecrets)?$", rest)
        if m:
            return self._datastore(base + rest, m.group(1), bool(m.group(2)))
        m = re.match(r"^/jobs(?:/([^/]+))?(/cancel)?$", rest)
        if m:
            return self._job(method, base, m.group(1), bool(m.group(2)), body)
        m = re.match(r"^/operations/cancel-([^/]+)$", rest)
        if m:  # the cancel LRO's Location: done at once
            return self._json(200, {}, {})
        return self._error(404, "NoRoute", f"fake Azure has no route for {method} {rest}")

    def _code(self, method, path, name, version, pending, query, body):
        if version is None:  # list, by content hash
            found = [c for c in self.codes.values() if c["properties"].get("_hash") == query.get("hash")]
            return self._json(200, {"value": found})
        key = f"{name}:{version}"
        if pending:
            container = f"code-{uuid.uuid4().hex[:8]}"
            sas = f"http://127.0.0.1:{self.port}/{STORE}/{container}?sv=2021-08-06&sig=fake"
            return self._json(200, {"blobReferenceForConsumption": {
                "blobUri": f"https://{STORE}.blob.core.windows.net/{container}",
                "storageAccountArmId": ("/subscriptions/x/resourceGroups/x/providers/Microsoft.Storage"
                                        "/storageAccounts/x"),
                "credential": {"credentialType": "SAS", "sasUri": sas}}, "pendingUploadId": None,
                "pendingUploadType": "TemporaryBlobReference"})
        if method == "PUT":
            self.codes[key] = dict(body, id=path, name=version)
            self.codes[key]["properties"]["_hash"] = body["properties"].get("properties", {}).get("hash_sha256")
        if key not in self.codes:
            return self._error(404, "ResourceNotFound", f"code {key} not found")
        return self._json(200, self.codes[key])

    def _job(self, method, base, name, cancel, body):
        if name is None:  # list
            return self._json(200, {"value": list(self.jobs.values())})
        if method == "PUT":
            props = body["properties"]
            assert props.get("jobType") == "Command", props
            assert props.get("codeId", "").startswith(base + "/codes/"), f"code not uploaded: {props.get('codeId')}"
            assert "/environments/" in props.get("environmentId", ""), props.get("environmentId")
            job = json.loads(json.dumps(body))
            job.update(id=f"{base}/jobs/{name}", name=name, type="Microsoft.MachineLearningServices/workspaces/jobs")
            job["properties"]["status"] = "NotStarted"
            job["properties"]["services"] = {"Studio": {"jobServiceType": "Studio",
                                                        "endpoint": f"https://ml.azure.com/runs/{name}?wsid=fake"}}
            job["systemData"] = {"createdAt": "2025-01-02T03:04:05Z", "createdBy": "tester"}
            self.jobs[name] = job
            self.script.setdefault(name, list(self.default_script))
            return self._json(201, job)
        if name not in self.jobs:
            return self._error(404, "UserError", f"job {name} not found")
        if cancel:
            assert method == "POST"
            props = self.jobs[name]["properties"]
            if props["status"] not in ("Completed", "Failed", "Canceled"):
                props["status"] = "Canceled"
            return self._json(202, {}, {"Location": f"https://{ARM}{base}/operations/cancel-{name}?api-version=2024-01-01-preview",
                                        "Retry-After": "0"})
        return self._json(200, self.jobs[name])

    def _datastore(self, path: str, name: str, secrets: bool):
        if name not in self.datastores:
            return self._error(404, "UserError", f"datastore {name} not found")
        if secrets:  # jobs.download asks for an expiring secret: a SAS token of the container
            return self._json(200, {"secretsType": "Sas", "sasToken": "sv=2021-08-06&sr=c&sig=fake"})
        return self._json(200, {"id": path, "name": name,
                                "type": "Microsoft.MachineLearningServices/workspaces/datastores",
                                "properties": {"datastoreType": "AzureBlob", "accountName": STORE,
                                               "containerName": self.datastores[name], "endpoint": "core.windows.net",
                                               "protocol": "https", "isDefault": name == "workspaceblobstore",
                                               "credentials": {"credentialsType": "AccountKey"}}})

    # -- outputs: the run's output assets and their datastore URIs ----------------------------
    def _output_assets(self, name: str) -> Dict[str, dict]:
        """The run's named outputs as the service registers them: name -> (asset id, type, URI)."""
        outputs = self.jobs[name]["properties"].get("outputs") or {}
        sub, rg, ws = self.scope
        found = {}
        for output, spec in outputs.items():
            uri = spec.get("uri") or ""
            if uri.startswith("azureml://datastores/"):  # the long form the service answers with
                uri = f"azureml://subscriptions/{sub}/resourcegroups/{rg}/workspaces/{ws}/" + uri[len("azureml://"):]
            found[output] = {"assetId": f"azureml://locations/westeurope/workspaces/{WORKSPACE_ID}/data/"
                                        f"azureml_{name}_output_data_{output}/versions/1",
                             "type": spec.get("jobOutputType", "uri_folder"), "uri": uri}
        return found

    def _run_data(self, body):
        name = body.get("runId")
        if name not in self.jobs:
            return self._error(404, "NotFound", f"no run {name}")
        outputs = {k: {"assetId": v["assetId"], "type": v["type"]} for k, v in self._output_assets(name).items()}
        status = self.jobs[name]["properties"]["status"]
        return self._json(200, {"runMetadata": {"runId": name, "status": status, "outputs": outputs}})

    def _resolve_data(self, body):
        every = {a["assetId"]: a for name in self.jobs for a in self._output_assets(name).values()}
        asked = body.get("values") or []
        return self._json(200, {"values": {i: {"uri": every[i]["uri"], "type": every[i]["type"]}
                                           for i in asked if i in every}})

    # -- run history and logs -----------------------------------------------------------------
    def _history(self, method: str, rest: str):
        m = re.match(r"^/runs/([^/]+)/details$", rest) or re.match(r"^/experiments/[^/]+/runs/([^/]+)/details$", rest)
        if not m or m.group(1) not in self.jobs:
            return self._error(404, "NotFound", f"no run for {rest}")
        name = m.group(1)
        props = self.jobs[name]["properties"]
        if self.script.get(name):
            status, add = self.script[name].pop(0)
            props["status"] = status
            for file, text in (add or {}).items():
                self.logs.setdefault(name, {})[file] = self.logs.get(name, {}).get(file, "") + text
        files = {f: f"https://{LOGS}/{name}/{f}?sv=fake&sig=fake" for f in self.logs.get(name, {})}
        files["system_logs/lifecycler/execution-wrapper.log"] = f"https://{LOGS}/{name}/system.log?sig=fake"
        details = {"runId": name, "status": props["status"], "logFiles": files, "warnings": []}
        if name in self.run_errors:  # RunDetails.error: an ErrorResponse around a RootError (runhistory models)
            details["error"] = {"error": self.run_errors[name]}
        return self._json(200, details)

    def _log_file(self, path: str):
        _, name, file = path.split("/", 2)
        text = self.logs.get(name, {}).get(file, "system log line\n")
        return 200, {"Content-Type": "text/plain"}, text.encode()

    # -- blob storage (path-style, like Azurite) -------------------------------------------------
    def _blob(self, method: str, path: str, query: dict, headers: Dict[str, str], body: bytes):
        assert path.startswith(f"/{STORE}/"), f"unexpected loopback request {method} {path}"
        assert query.get("sig") == "fake", "blob request without the SAS signature"
        key = path[len(STORE) + 2:]
        low = {k.lower(): v for k, v in headers.items()}
        if method == "PUT" and query.get("comp") == "metadata":
            if key not in self.blobs:
                return 404, {"x-ms-error-code": "BlobNotFound"}, b""
            self.blobs[key]["metadata"] = {k[len("x-ms-meta-"):]: v for k, v in low.items()
                                           if k.startswith("x-ms-meta-")}
            return 200, {"ETag": '"1"', "Last-Modified": "Thu, 02 Jan 2025 03:04:05 GMT"}, b""
        if method == "PUT":
            self.blobs[key] = {"data": body, "metadata": {}}
            return 201, {"ETag": '"1"', "Last-Modified": "Thu, 02 Jan 2025 03:04:05 GMT",
                         "x-ms-request-server-encrypted": "true"}, b""
        if method == "GET" and query.get("restype") == "container" and query.get("comp") == "list":
            return self._blob_list(key, query.get("prefix") or "")
        if method in ("HEAD", "GET"):
            blob = self.blobs.get(key)
            if blob is None:
                return 404, {"x-ms-error-code": "BlobNotFound"}, b""
            data = blob["data"]
            out = {"Content-Type": "application/octet-stream", "ETag": '"1"', "x-ms-blob-type": "BlockBlob",
                   "Last-Modified": "Thu, 02 Jan 2025 03:04:05 GMT", "Content-Length": str(len(data))}
            out.update({f"x-ms-meta-{k}": v for k, v in blob["metadata"].items()})
            wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", low.get("x-ms-range") or low.get("range") or "")
            if method == "GET" and wanted:  # the SDK downloads in ranges (Get Blob, x-ms-range)
                first = int(wanted.group(1))
                last = min(int(wanted.group(2) or len(data) - 1), len(data) - 1)
                out.update({"Content-Range": f"bytes {first}-{last}/{len(data)}",
                            "Content-Length": str(last - first + 1)})
                return 206, out, data[first:last + 1]
            return 200, out, (data if method == "GET" else b"")
        return 400, {"x-ms-error-code": "UnsupportedHttpVerb"}, b""

    def _blob_list(self, container: str, prefix: str):
        """List Blobs (``restype=container&comp=list``), one page, as the Blob service's XML."""
        from xml.sax.saxutils import escape
        names = sorted(k.partition("/")[2] for k in self.blobs if k.startswith(f"{container}/{prefix}"))
        items = "".join(
            f"<Blob><Name>{escape(n)}</Name><Properties><Last-Modified>Thu, 02 Jan 2025 03:04:05 GMT</Last-Modified>"
            f"<Etag>\"1\"</Etag><Content-Length>{len(self.blobs[f'{container}/{n}']['data'])}</Content-Length>"
            "<Content-Type>application/octet-stream</Content-Type><BlobType>BlockBlob</BlobType></Properties>"
            "<Metadata /></Blob>" for n in names)
        xml = (f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="https://{STORE_HOST}/" '
               f'ContainerName="{escape(container)}"><Prefix>{escape(prefix)}</Prefix><Blobs>{items}</Blobs>'
               "<NextMarker /></EnumerationResults>")
        return 200, {"Content-Type": "application/xml", "x-ms-version": "2021-08-06"}, xml.encode()

    # -- for the tests --------------------------------------------------------------------------
    def calls(self, host: Optional[str] = None, method: Optional[str] = None, contains: str = "") -> List[dict]:
        return [r for r in self.requests if (host is None or r["host"] == host)
                and (method is None or r["method"] == method) and contains in r["path"]]
