"""What ships to the nodes is a copy of the code tree, never of what it points to, and never the
user's credentials: a hostile code directory (a link to ~/.aws/credentials, a link to /dev/zero,
a FIFO, a socket, .env / .ssh / id_rsa / *.pem files) packed through the real object stores'
doubles (S3: moto; COS: cos_double; OBS: obs_double), the Kubernetes ConfigMap (the fake API
server) and the local working copy.  Packing streams: a few hundred MB file costs a bounded RSS.

Facts relied on: a tar symbolic-link member (``SYMTYPE``) carries its target as ``linkname`` and
no data (POSIX ustar, Python's ``tarfile``); ``os.open`` of a FIFO blocks until a writer opens it
unless ``O_NONBLOCK`` is given (open(2)); ``/dev/zero`` reads without end.
"""
import base64
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import textwrap

import pytest

from doubles.aws_double import CREDENTIALS, REGION, AwsDouble  # noqa: E402
from doubles.tione_fixtures import cos, fake  # noqa: E402,F401
from doubles.obs_double import AK, SK, ObsDouble  # noqa: E402

from cloudtrain.transfer import objectstore, shipping  # noqa: E402
from cloudtrain.input.loading import load_job  # noqa: E402
from cloudtrain.extend.plugins import get_provider  # noqa: E402
from conftest import cli_env, run_cli, write_job  # noqa: E402
from doubles.kube_double import FakeKube  # noqa: E402

SECRET = "AKIAHOSTILE0SECRET0KEY"
KEPT_HOME = {".env", ".env.local", ".ssh/id_ed25519", "id_rsa", "deploy/server.pem", ".aws/credentials",
             "keys/tls.key", ".config/gcloud/application_default_credentials.json", "sa/credentials.json"}


def hostile_code(tmp_path, monkeypatch, fifo=True, extra_ignore=""):
    """A code directory with a fake HOME beside it: links out of the tree (to the home's AWS
    credentials, to /dev/zero), a FIFO, a socket, and credential files in the tree."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    monkeypatch.setenv("HOME", str(home))
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "train.py").write_text("print('trained')\n")
    (code / "pkg" / "util.py").write_text("X = 1\n")
    os.symlink(os.path.expanduser("~/.aws/credentials"), code / "creds")
    os.symlink("/dev/zero", code / "zero")
    os.symlink("../../home/.aws/credentials", code / "pkg" / "up")  # ../ climbing out of the tree
    os.symlink("pkg/util.py", code / "inside.py")            # inside the tree: a plain link
    os.symlink(str(home / ".aws"), code / "awsdir")          # a directory link: never descended
    if fifo:
        os.mkfifo(code / "pipe")
    for rel in KEPT_HOME:
        (code / rel).parent.mkdir(parents=True, exist_ok=True)
        (code / rel).write_text(f"secret {SECRET}\n")
    (code / "public.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    (code / ".cloudtrainignore").write_text("!public.pem\n" + extra_ignore)
    return code


def serve_socket(path):
    """A listening unix socket at ``path`` (closed by the caller)."""
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


def members(data: bytes) -> dict:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


def assert_copy_of_the_tree(data: bytes):
    """The archive holds the tree's files and links as links; no credential, no target's bytes."""
    found = members(data)
    assert SECRET.encode() not in gunzip(data)
    assert found["creds"].issym() and found["creds"].linkname == os.path.expanduser("~/.aws/credentials")
    assert found["zero"].issym() and found["zero"].linkname == "/dev/zero" and found["zero"].size == 0
    assert found["pkg/up"].issym() and found["inside.py"].linkname == "pkg/util.py"
    assert found["awsdir"].issym() and not [n for n in found if n.startswith("awsdir/")]
    assert "pipe" not in found and "sock" not in found
    assert not KEPT_HOME & set(found), KEPT_HOME & set(found)
    assert "public.pem" in found and "train.py" in found and "pkg/util.py" in found


def gunzip(data: bytes) -> bytes:
    import gzip
    return gzip.decompress(data)


# -- the object stores ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def aws():
    with AwsDouble() as double:
        yield double


def kube_job(tmp_path, provider="volcano", **options):
    return write_job(tmp_path, f"""
        name: hostile
        code: code
        command: python train.py
        image: registry.example/train:1
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        providers: {{{provider}: {json.dumps(options)}}}
        """)


@pytest.mark.timeout(120)  # a FIFO or /dev/zero read would hang here: the harness ends it
def test_s3_gets_the_links_never_their_targets_and_no_credential_file(tmp_path, monkeypatch, aws):
    code = hostile_code(tmp_path, monkeypatch)
    sock = serve_socket(code / "sock")
    aws.fresh(monkeypatch, "code-bucket")
    for key, value in {**CREDENTIALS, "AWS_DEFAULT_REGION": REGION, "AWS_CONFIG_FILE": "/dev/null",
                       "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}.items():
        monkeypatch.setenv(key, value)
    provider = get_provider("volcano")
    path = kube_job(tmp_path, code_shipping="store", code_store="s3://code-bucket/c", code_store_endpoint=aws.endpoint)
    with pytest.warns(Warning) as said:
        rendered = provider.render(load_job(path))
    (url,) = provider.ship_code(rendered)
    sock.close()
    key = url.split("/", 3)[3]
    assert_copy_of_the_tree(aws.client("s3").get_object(Bucket="code-bucket", Key=key)["Body"].read())
    text = "\n".join(str(w.message) for w in said)
    assert "9 credential files" in text and ".env" in text and "stay on this machine" in text
    assert ("creds -> " in text and "zero -> /dev/zero" in text and "pkg/up -> ../../home/.aws/credentials" in text
            and "dangle" in text)
    assert "pipe (FIFO)" in text and "sock (socket)" in text
    assert "inside.py" not in text


@pytest.mark.timeout(120)
def test_cos_gets_the_same_copy_through_tione(tmp_path, monkeypatch, fake, cos):
    hostile_code(tmp_path, monkeypatch)
    from tencentcloud.common.credential import Credential
    from cloudtrain.input.loading import job_from_dict
    from cloudtrain_tione.provider import TioneProvider
    from doubles.tione_double import SECRET_ID, SECRET_KEY
    job = job_from_dict({"name": "hostile", "code": str(tmp_path / "code"), "command": "python train.py",
                         "image": "img:1",
                         "providers": {"tione": {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST",
                                                 "code_store": "cos://train-1250000000/c"}}})
    rendered = get_provider("tione").render(job)
    TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY), endpoint=fake.url, cos_endpoint=cos.url,
                  poll=0).ship_code(rendered)
    (put,) = cos.puts()
    data = cos.objects[("train-1250000000", put)]
    assert_copy_of_the_tree(data)
    assert ".cloudtrain/cloudtrain/launch/main.py" in members(data)


@pytest.mark.timeout(120)
def test_obs_gets_the_same_copy(tmp_path, monkeypatch):
    hostile_code(tmp_path, monkeypatch)
    from cloudtrain.input.loading import job_from_dict
    from cloudtrain_modelarts.obsstore import ObsStore
    job = job_from_dict({"name": "hostile", "code": str(tmp_path / "code"), "command": "python train.py"})
    with ObsDouble() as obs:
        obs.create_bucket("obs-code")
        monkeypatch.setenv("HUAWEICLOUD_SDK_AK", AK)
        monkeypatch.setenv("HUAWEICLOUD_SDK_SK", SK)
        monkeypatch.setenv("HUAWEICLOUD_SDK_REGION_OBS_CN_NORTH_4", obs.endpoint)
        objectstore.forget_uploads()
        archive = shipping.archive(job, ["cloudtrain_modelarts.detect:detect"])
        url = objectstore.code_url(objectstore.ObjectUrl("obs", "obs-code", "c"), archive)
        assert objectstore.upload_once(ObsStore(region="cn-north-4"), url, archive)
        assert_copy_of_the_tree(obs.object("obs-code", url.key))
    # the digest that names a cloud job's request: the links' text, never their targets' bytes
    digest = shipping.code_digest(job)
    (tmp_path / "home" / ".aws" / "credentials").write_text("rotated\n")
    assert shipping.code_digest(job) == digest
    os.unlink(tmp_path / "code" / "zero")
    os.symlink("/dev/null", tmp_path / "code" / "zero")
    assert shipping.code_digest(job) != digest


@pytest.mark.timeout(120)
def test_the_configmap_gets_the_same_copy(tmp_path, monkeypatch, home):
    hostile_code(tmp_path, monkeypatch)
    with FakeKube() as kube:
        cfg = kube.kubeconfig(tmp_path / "kubeconfig")
        get_provider("kubeflow").submit(load_job(kube_job(tmp_path, "kubeflow", kubeconfig=str(cfg))))
        stored = kube.find("configmaps", "default", "hostile-code")
    assert_copy_of_the_tree(base64.b64decode(stored["binaryData"]["code.tar.gz"]))


@pytest.mark.timeout(120)
def test_a_re_included_credential_ships_and_only_that_one(tmp_path, monkeypatch):
    code = hostile_code(tmp_path, monkeypatch, fifo=False, extra_ignore="!.aws/credentials\n")
    from cloudtrain.input.loading import job_from_dict
    job = job_from_dict({"name": "hostile", "code": str(code), "command": "python train.py"})
    found = members(shipping.archive(job, launcher=False).read_bytes())
    assert ".aws/credentials" in found and "public.pem" in found
    assert not (KEPT_HOME - {".aws/credentials"}) & set(found)


# -- the local working copy -----------------------------------------------------------------------
@pytest.mark.timeout(180)
def test_the_local_working_copy_is_the_same_copy(tmp_path, monkeypatch, home):
    code = hostile_code(tmp_path, monkeypatch)
    path = write_job(tmp_path, """
        name: hostile
        code: code
        command: python train.py
        """)
    run = get_provider("local").submit(load_job(path))
    status = run.wait(timeout=120, poll=0.2)
    assert status.state.value == "SUCCEEDED", run.logs()
    (node,) = [p for p in (home / "runs").glob("*/node-0/code")]
    assert os.readlink(node / "creds") == os.path.expanduser("~/.aws/credentials")
    assert os.readlink(node / "zero") == "/dev/zero"
    assert not (node / "pipe").exists() and (node / "train.py").read_text() == "print('trained')\n"
    shipped = {str(p.relative_to(node)) for p in node.rglob("*")}
    assert not KEPT_HOME & shipped and "public.pem" in shipped
    assert (code / "pipe").exists()  # left where it is


# -- the CLI: render finishes, and says what stays home --------------------------------------------
def test_render_with_a_fifo_finishes_and_names_what_it_left_out(tmp_path, monkeypatch):
    hostile_code(tmp_path, monkeypatch)
    path = kube_job(tmp_path, "kubeflow")
    proc = run_cli("render", str(path), "-p", "kubeflow", env=cli_env({"HOME": str(tmp_path / "home")}), timeout=60)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("cloudtrain: warning: code:")]
    assert len(warnings) == 3, proc.stderr  # once each, although render validates first
    assert "9 credential files" in warnings[0] and "and 4 more" in warnings[0]  # names truncated
    assert "pipe (FIFO)" in warnings[2]
    validate = run_cli("validate", str(path), "-p", "kubeflow", env=cli_env({"HOME": str(tmp_path / "home")}),
                       timeout=60)
    assert validate.returncode == 0 and validate.stderr.count("cloudtrain: warning: code:") == 3, validate.stderr


# -- bounded memory -----------------------------------------------------------------------------
# The peak is the child's own VmHWM (this process image's high-water mark): ru_maxrss would also
# count the parent's pages the child held between fork and exec (Linux keeps the maximum across exec).
PACK_AND_MEASURE = textwrap.dedent("""
    import sys
    from cloudtrain.transfer import shipping
    from cloudtrain.input.loading import job_from_dict
    job = job_from_dict({"name": "big", "code": sys.argv[1], "command": "python t.py"})
    archive = shipping.archive(job)
    digest = shipping.code_digest(job)
    peak = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
    print(len(archive), len(digest), peak)
    """)


@pytest.mark.timeout(300)
def test_packing_a_large_file_holds_a_bounded_amount_of_memory(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "t.py").write_text("print(1)\n")
    with open(code / "weights.bin", "wb") as f:  # 320 MB: 32 MB of random bytes, the rest a hole
        f.write(os.urandom(32 << 20))
        f.truncate(320 << 20)
    proc = subprocess.run([sys.executable, "-c", PACK_AND_MEASURE, str(code)], capture_output=True, text=True,
                          env=cli_env(), timeout=280)  # the cloudtrain this test imports
    assert proc.returncode == 0, proc.stderr
    size, digest_len, peak_kib = map(int, proc.stdout.split())
    assert size > 32 << 20 and digest_len == 64
    assert peak_kib < 150 * 1024, f"packing a 320 MB file peaked at {peak_kib / 1024:.0f} MB"


# -- downloaded outputs (issue 30) ----------------------------------------------------------------
@pytest.mark.timeout(240)
def test_downloaded_outputs_never_ship_with_the_next_job(tmp_path, home):
    project = tmp_path / "project"
    path = write_job(project, """
        name: out
        code: .
        command: python train.py
        """)
    (project / "train.py").write_text("import os\nopen(os.path.join(os.environ['CLOUDTRAIN_OUTPUT_DIR'], "
                                      "'model.bin'), 'wb').write(b'weights' * 1000)\n")
    env = cli_env({"CLOUDTRAIN_HOME": str(home)})
    proc = run_cli("submit", str(path), "-p", "local", env=env, cwd=project, timeout=200)  # follows it to the end
    assert proc.returncode == 0, proc.stderr
    handle = next(word for word in (proc.stdout + proc.stderr).split() if word.startswith("local://"))
    # the default place (./outputs/<id> of the job's directory) and one of the user's choosing
    assert run_cli("outputs", handle, env=env, cwd=project).returncode == 0
    assert run_cli("outputs", handle, "-o", "results/first", env=env, cwd=project).returncode == 0
    downloaded = sorted(str(p.relative_to(project)) for p in project.rglob("model.bin"))
    assert len(downloaded) == 2 and downloaded[1] == "results/first/model.bin", downloaded
    with FakeKube() as kube:
        cfg = kube.kubeconfig(tmp_path / "kubeconfig")
        (project / "job.yaml").write_text((project / "job.yaml").read_text() + "image: registry.example/train:1\n"
                                          f"providers: {{kubeflow: {{kubeconfig: {cfg}}}}}\n")
        submitted = run_cli("submit", str(path), "-p", "kubeflow", "--detach", env=env, cwd=project, timeout=120)
        assert submitted.returncode == 0, submitted.stderr
        stored = kube.find("configmaps", "default", "out-code")
    shipped = members(base64.b64decode(stored["binaryData"]["code.tar.gz"]))
    assert "train.py" in shipped and "results" not in {n.split("/")[0] for n in shipped}
    assert not [n for n in shipped if n.endswith("model.bin") or n.startswith("outputs")], sorted(shipped)


def test_the_cli_leaves_no_archive_behind(tmp_path):
    """The CLI exits at once (os._exit: no atexit handler runs); the archives it packed go with it."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print(1)\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc = run_cli("render", str(kube_job(tmp_path, "kubeflow")), "-p", "kubeflow",
                   env=cli_env({"TMPDIR": str(scratch)}))
    assert proc.returncode == 0 and "ConfigMap" in proc.stdout, proc.stderr
    assert list(scratch.iterdir()) == []


@pytest.mark.timeout(120)
def test_the_staged_directory_azure_uploads_holds_no_link_out_of_it(tmp_path, monkeypatch):
    """Azure ML uploads the staged directory through an SDK that reads what links point to: a
    link stays only where it leads to a staged file."""
    code = hostile_code(tmp_path, monkeypatch, fifo=False)
    os.symlink(".aws/credentials", code / "inner-creds")  # inside the tree, to a file kept home
    from cloudtrain.input.loading import job_from_dict
    staged = shipping.stage(job_from_dict({"name": "h", "code": str(code), "command": "python train.py"}),
                            tmp_path / "staged")
    links = {str(p.relative_to(staged)): os.readlink(p) for p in staged.rglob("*") if p.is_symlink()}
    assert links == {"inside.py": "pkg/util.py"}
    every = b"".join(p.read_bytes() for p in staged.rglob("*") if p.is_file())
    assert SECRET.encode() not in every and (staged / "public.pem").exists() and not (staged / "id_rsa").exists()
