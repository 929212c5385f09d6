"""Code too large for a ConfigMap goes through an object store on every Kubernetes provider:
``providers.<p>.code_store``; submit uploads the archive content-addressed (the real boto3 against
moto in server mode), puts a time-limited GET URL in the Secret ``<name>-code-url``, and the pod's
``python3 -m cloudtrain.launch.unpack --url-file ... --sha256 ...`` fetches, checks and unpacks it.

Pinned facts:
- a ConfigMap holds at most 1 MiB (kubernetes pkg/apis/core/validation ``ValidateConfigMap``,
  ``core.MaxSecretSize``): above ``INLINE_CODE_LIMIT`` the code cannot travel inline;
- a SigV4 presigned URL lasts at most 7 days: "X-Amz-Expires ... Minimum value of 1. Maximum value
  of 604800 (seven days)" (Amazon S3 API reference, "Authenticating Requests: Using Query
  Parameters (AWS Signature Version 4)");
- a Secret volume's files hold the Secret's keys (kubernetes.io/docs/concepts/configuration/secret,
  "Using Secrets as files from a Pod"): the URL reaches the pod as ``/opt/cloudtrain-code-url/url``.
"""
import hashlib
import json
import os
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from doubles.aws_double import CREDENTIALS, REGION, AwsDouble  # noqa: E402

from cloudtrain.transfer import shipping  # noqa: E402
from cloudtrain.spec.errors import BadInput  # noqa: E402
from cloudtrain.launch import unpack as unpacking  # noqa: E402
from cloudtrain.input.loading import load_job  # noqa: E402
from cloudtrain.extend.plugins import get_provider  # noqa: E402
from cloudtrain_kubernetes import manifests as m  # noqa: E402
from conftest import cli_env, run_cli, write_job  # noqa: E402
from crd_schemas import validate  # noqa: E402
from doubles.kube_double import FakeKube  # noqa: E402
from loopback import LoopbackServer, QuietHandler  # noqa: E402

BUCKET = "ct-code-store"
STORE = f"s3://{BUCKET}/team/code"
PROVIDERS = {"kubeflow": {}, "kubeflow-trainer": {}, "volcano": {},
             "eks": {"cluster": "c", "region": REGION}, "modelarts-lite": {"cluster_id": "x", "region": "cn-north-4"}}
WORKLOAD = {"kubeflow": "PyTorchJob", "kubeflow-trainer": "TrainJob", "volcano": "Job", "eks": "PyTorchJob",
            "modelarts-lite": "Job"}


def big_code(tmp_path, size=1000 * 1024):
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True, exist_ok=True)
    (code / "train.py").write_text("print('trained')\n")
    (code / "pkg" / "util.py").write_text("X = 1\n")
    (code / "weights.bin").write_bytes(os.urandom(size))  # incompressible: the archive is as large
    return code


def job_yaml(tmp_path, provider="kubeflow", **options):
    options = json.dumps({**PROVIDERS[provider], **options})
    return write_job(tmp_path, f"""
        name: big
        code: code
        command: python train.py
        image: registry.example/train:1
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        providers: {{{provider}: {options}}}
        """)


def archive_sha(path) -> str:
    return hashlib.sha256(shipping.packed_code(load_job(path))).hexdigest()


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_code_above_the_configmap_limit_renders_an_upload_and_a_url_secret(tmp_path, provider):
    big_code(tmp_path)
    path = job_yaml(tmp_path, provider, code_store=STORE, code_store_endpoint="http://127.0.0.1:9000")
    artifacts = get_provider(provider).render(load_job(path)).artifacts
    sha = archive_sha(path)
    upload = artifacts[0]
    assert (upload.kind, upload.name) == ("s3/PutObject", "code")
    assert upload.content == {"Bucket": BUCKET, "Key": f"team/code/cloudtrain-code/{sha}.tar.gz",
                              "ContentType": "application/gzip"}
    objects = [a.content for a in artifacts[1:]]
    assert [a.kind for a in artifacts[1:]] == ["kubernetes/manifest"] * len(objects)
    for obj in objects:
        validate(obj)  # the Secret as a core object, the workload against its upstream CRD
    names = [o["metadata"]["name"] for o in objects]
    assert "big-code-url" in names and "big-code" not in names  # no ConfigMap could hold it
    secret = objects[names.index("big-code-url")]
    assert secret["kind"] == "Secret" and secret["stringData"] == {"url": "***"}
    workload = objects[-1]
    assert workload["kind"] == WORKLOAD[provider]
    text = json.dumps(workload)
    assert f"-m cloudtrain.launch.unpack --url-file {m.CODE_URL_DIR}/url --sha256 {sha}" in text
    assert '"secretName": "big-code-url"' in text and m.CODE_DIR + '"' not in text


def test_code_shipping_store_sends_even_small_code_through_the_store(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print(1)\n")
    path = job_yaml(tmp_path, code_store=STORE, code_shipping="store")
    kinds = [a.name for a in get_provider("kubeflow").render(load_job(path)).artifacts]
    assert kinds[0] == "code" and "Secret/big-code-url" in kinds and "ConfigMap/big-code" not in kinds
    # auto (the default): code that fits stays in the request even with a store configured
    path = job_yaml(tmp_path, code_store=STORE)
    kinds = [a.name for a in get_provider("kubeflow").render(load_job(path)).artifacts]
    assert "ConfigMap/big-code" in kinds and "code" not in kinds


def test_too_large_without_a_store_names_code_store_offline(tmp_path):
    big_code(tmp_path)
    path = job_yaml(tmp_path)
    proc = run_cli("validate", "-p", "kubeflow", path, check=2)
    assert f"{path}:2: code: the code archive" in proc.stderr  # the `code` line
    assert "providers.kubeflow.code_store" in proc.stderr and "s3://my-bucket/cloudtrain" in proc.stderr
    proc = run_cli("validate", "-p", "modelarts-lite", job_yaml(tmp_path, "modelarts-lite"), check=2)
    assert "providers.modelarts-lite.code_store" in proc.stderr and "obs://my-bucket/cloudtrain" in proc.stderr


@pytest.mark.parametrize("options,field,words", [
    ({"code_shipping": "configmap", "code_store": STORE}, "code", ["code_shipping to auto", "1001 KiB packed"]),
    ({"code_shipping": "store"}, "providers.kubeflow.code_shipping", ["is store", "providers.kubeflow.code_store"]),
    ({"code_store": "gs://bucket/code"}, "providers.kubeflow.code_store", ["gs://", "s3://"]),
    ({"code_store": "bucket-without-scheme"}, "providers.kubeflow.code_store", ["SCHEME://BUCKET/PREFIX"]),
    ({"code_store": STORE, "code_url_expires": "8d"}, "providers.kubeflow.code_url_expires", ["604800"]),
])
def test_bad_code_store_settings_are_exit_2_at_their_line(tmp_path, options, field, words):
    big_code(tmp_path)
    path = job_yaml(tmp_path, **options)
    proc = run_cli("validate", "-p", "kubeflow", path, check=2)
    line = 2 if field == "code" else 6  # the providers line, where the option is written
    assert f"{path}:{line}: {field}" in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


def test_an_s3_store_without_boto3_is_exit_2_with_the_install_command(tmp_path, monkeypatch):
    big_code(tmp_path)
    path = job_yaml(tmp_path, code_store=STORE)
    monkeypatch.setitem(sys.modules, "boto3", None)  # the kubernetes extra alone: no boto3
    with pytest.raises(BadInput, match=r"providers\.kubeflow\.code_store: s3:// object stores are reached through "
                                       r"boto3, which is not installed; pip install 'cloudtrain\[aws\]'"):
        get_provider("kubeflow").validate(load_job(path))


def test_render_imports_no_sdk_and_shows_no_signed_url(tmp_path):
    big_code(tmp_path)
    path = job_yaml(tmp_path, code_store=STORE)
    script = ("import sys; from cloudtrain.input.loading import load_job; "
              "from cloudtrain.extend.plugins import get_provider; "
              f"print(get_provider('kubeflow').render(load_job({str(path)!r})).to_yaml()); "
              "assert not {'boto3', 'botocore'} & set(sys.modules), sorted(sys.modules)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    secret = next(d for d in yaml.safe_load_all(proc.stdout) if d.get("kind") == "Secret")
    assert secret["stringData"] == {"url": "***"}
    assert "Signature" not in proc.stdout and "Expires" not in proc.stdout


# -- submit: the real boto3 against moto, the real kubernetes client against the fake API server --
@pytest.fixture(scope="module")
def moto():
    with AwsDouble() as aws:
        yield aws


@pytest.fixture
def s3(moto, monkeypatch):
    moto.fresh(monkeypatch, BUCKET)
    for key, value in {**CREDENTIALS, "AWS_DEFAULT_REGION": REGION, "AWS_CONFIG_FILE": "/dev/null",
                       "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}.items():
        monkeypatch.setenv(key, value)
    return moto


def expires_in(url: str) -> float:
    """Seconds the presigned ``url`` has left (SigV4's X-Amz-Date + X-Amz-Expires, or SigV2's Expires)."""
    q = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
    if "X-Amz-Expires" in q:
        import calendar
        signed = calendar.timegm(time.strptime(q["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))
        return signed + int(q["X-Amz-Expires"]) - time.time()
    return int(q["Expires"]) - time.time()


def test_submit_uploads_once_and_the_pod_fetches_the_archive_through_the_secrets_url(tmp_path, home, s3):
    big_code(tmp_path)
    with FakeKube() as kube:
        cfg = kube.kubeconfig(tmp_path / "kubeconfig")
        path = job_yaml(tmp_path, kubeconfig=cfg, code_store=STORE, code_store_endpoint=s3.endpoint,
                        code_url_expires="2h")
        job = load_job(path)
        get_provider("kubeflow").submit(job)
        secret = kube.find("secrets", "default", "big-code-url")
        pytorchjob = kube.find("pytorchjobs", "default", "big")
        assert kube.find("configmaps", "default", "big-code") is None
    data, sha = shipping.packed_code(job), archive_sha(path)
    key = f"team/code/cloudtrain-code/{sha}.tar.gz"
    assert s3.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read() == data
    assert s3.count("S3.PUT", "s3") == 1
    assert secret["metadata"]["ownerReferences"][0]["uid"] == pytorchjob["metadata"]["uid"]  # goes with the job
    url = secret["stringData"]["url"]
    assert url.startswith(f"{s3.endpoint}/{BUCKET}/{key}?") and 7190 < expires_in(url) <= 7200
    # the pod: the Secret's key is the mounted file; unpack fetches it with urllib, checks, unpacks
    mounted = tmp_path / "pod" / "code-url"
    mounted.parent.mkdir()
    mounted.write_text(url)
    work = tmp_path / "pod" / "work"
    assert unpacking.main(["--url-file", str(mounted), "--sha256", sha, str(work)]) == 0
    assert (work / "train.py").read_text() == "print('trained')\n"
    assert (work / "pkg" / "util.py").read_text() == "X = 1\n"
    assert (work / "weights.bin").read_bytes() == (tmp_path / "code" / "weights.bin").read_bytes()
    # the same code again (a new process's memory, another job): found in the store, not sent again
    from cloudtrain.transfer.objectstore import forget_uploads
    forget_uploads()
    with FakeKube() as kube:
        cfg = kube.kubeconfig(tmp_path / "kubeconfig")
        get_provider("kubeflow").submit(load_job(path, overrides={"name": "big-again"}))
        assert kube.find("secrets", "default", "big-again-code-url")["stringData"]["url"].startswith(s3.endpoint)
    assert s3.count("S3.PUT", "s3") == 1 and s3.count("S3.HEAD", "s3") == 2


def test_ship_code_uploads_the_rendered_archive_and_refuses_changed_code(tmp_path, s3):
    code = big_code(tmp_path)
    provider = get_provider("volcano")
    path = job_yaml(tmp_path, "volcano", code_store=STORE, code_store_endpoint=s3.endpoint)
    rendered = provider.render(load_job(path))
    assert provider.ship_code(rendered) == [f"{STORE}/cloudtrain-code/{archive_sha(path)}.tar.gz"]
    assert s3.count("S3.PUT", "s3") == 1
    (code / "train.py").write_text("print('changed')\n")
    with pytest.raises(BadInput, match="changed after the job was rendered"):
        provider.ship_code(rendered)
    assert s3.count("S3.PUT", "s3") == 1
    small = job_yaml(tmp_path / "small", "volcano")
    (tmp_path / "small" / "code").mkdir()
    (tmp_path / "small" / "code" / "t.py").write_text("1\n")
    with pytest.raises(BadInput, match=r"inside its request .*\.code_shipping: store"):
        provider.ship_code(provider.render(load_job(small)))


def test_submit_with_code_changed_since_render_creates_and_uploads_nothing(tmp_path, home, s3):
    code = big_code(tmp_path)
    with FakeKube() as kube:
        cfg = kube.kubeconfig(tmp_path / "kubeconfig")
        provider = get_provider("kubeflow")
        rendered = provider.render(load_job(job_yaml(tmp_path, kubeconfig=cfg, code_store=STORE,
                                                     code_store_endpoint=s3.endpoint)))
        (code / "weights.bin").write_bytes(os.urandom(1000))
        with pytest.raises(BadInput, match="changed after the job was rendered"):
            provider.submit(rendered)
        assert kube.find("pytorchjobs", "default", "big") is None
        assert kube.find("secrets", "default", "big-code-url") is None
    assert s3.count("S3.PUT", "s3") == 0


# -- the pod's side: the fetch ----------------------------------------------------------------------
class Answers(LoopbackServer):
    """Serves GET with the queued (status, body) answers, then the last one again."""

    def __init__(self, *answers):
        self.answers, self.paths = list(answers), []
        server = self

        class Handler(QuietHandler):
            def do_GET(self):
                server.paths.append(self.path)
                status, body = server.answers.pop(0) if len(server.answers) > 1 else server.answers[0]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)


def run_unpack(tmp_path, url, sha):
    (tmp_path / "url").write_text(url + "\n")
    return subprocess.run([sys.executable, "-m", "cloudtrain.launch.unpack", "--url-file", str(tmp_path / "url"),
                           "--sha256", sha, str(tmp_path / "work")], capture_output=True, text=True, timeout=120,
                          env=cli_env())


def archive_of(tmp_path):
    job = load_job(write_job(tmp_path / "j", "name: a\ncode: c\ncommand: python t.py\n"))
    (tmp_path / "j" / "c").mkdir()
    (tmp_path / "j" / "c" / "t.py").write_text("print(1)\n")
    data = shipping.archive(job, launcher=False).read_bytes()
    return data, hashlib.sha256(data).hexdigest()


def test_unpack_refuses_an_archive_whose_sha256_differs_and_never_prints_the_url(tmp_path):
    data, sha = archive_of(tmp_path)
    with Answers((200, data)) as server:
        proc = run_unpack(tmp_path, f"{server.url}/b/k.tar.gz?X-Amz-Signature=s3cr3t", "0" * 64)
    assert proc.returncode == 1 and f"not {'0' * 64} (the pod spec's)" in proc.stderr
    assert server.url in proc.stderr and "s3cr3t" not in proc.stderr and "/b/k" not in proc.stderr
    assert not (tmp_path / "work").exists()


def test_unpack_names_an_expired_url_and_tries_a_5xx_again(tmp_path):
    data, sha = archive_of(tmp_path)
    with Answers((403, b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>")) as server:
        proc = run_unpack(tmp_path, f"{server.url}/k?Signature=s3cr3t", sha)
    assert (proc.returncode == 1 and "HTTP 403" in proc.stderr and "expired" in proc.stderr
            and "s3cr3t" not in proc.stderr)
    assert len(server.paths) == 1  # a refusal is final
    with Answers((503, b"slow down"), (200, data)) as server:
        proc = run_unpack(tmp_path, f"{server.url}/k?Signature=s3cr3t", sha)
    assert proc.returncode == 0, proc.stderr
    assert len(server.paths) == 2 and (tmp_path / "work" / "t.py").read_text() == "print(1)\n"
