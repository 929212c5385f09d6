"""Missing credentials: the same exit code and the same shape of message on every cloud provider,
and nothing sent.

Each case runs ``cloudtrain submit`` in a subprocess whose environment holds no credentials of
any platform: no AWS_*, AZURE_*, TENCENTCLOUD_*, HUAWEICLOUD_*, TKE_*, KUBECONFIG variables, an
empty HOME (no ~/.aws, ~/.azure, ~/.tencentcloud, ~/.huaweicloud, ~/.kube), EC2 instance metadata
off (AWS_EC2_METADATA_DISABLED, botocore's switch).  Every HTTP(S) request the process makes goes
to a recording listener on 127.0.0.1 (HTTP_PROXY/HTTPS_PROXY, which botocore, requests, urllib and
azure-core honour; Azure's managed-identity endpoint through AZURE_POD_IDENTITY_AUTHORITY_HOST,
azure.identity's own override): the only requests allowed there are the credential chains' own
metadata lookups (Azure IMDS, Tencent's CVM role); a request to a platform API would be recorded
as well (a CONNECT to its host) and fail the test.  The listener closes each connection unanswered,
as an unreachable metadata service does.
"""
from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading

import pytest

from conftest import cli_env, write_job

SHAPE = re.compile(r"^cloudtrain: error: no (?P<platform>AWS|Azure|Tencent Cloud|Huawei Cloud|Kubernetes) credentials "
                   r"found \(looked in: [^()]+\); \S[^\n]*$", re.M)
CASES = {
    "sagemaker": ("AWS", {"role_arn": "arn:aws:iam::123456789012:role/train", "output_s3": "s3://bucket/out",
                          "region": "us-east-1"}),
    "ec2": ("AWS", {"image_id": "ami-0123456789abcdef0", "instance_profile": "node", "code_s3": "s3://bucket/code",
                    "region": "us-east-1"}),
    "eks": ("AWS", {"cluster": "train", "region": "us-east-1"}),
    "azure": ("Azure", {"subscription_id": "00000000-0000-0000-0000-000000000000", "resource_group": "rg",
                        "workspace": "ws", "compute": "gpu-cluster"}),
    "tione": ("Tencent Cloud", {"region": "ap-shanghai", "code_store": "cos://bucket-1250000000/code",
                                "instance_type": "TI.S.LARGE.POST"}),
    "modelarts": ("Huawei Cloud", {"region": "cn-north-4", "code_dir": "obs://bucket/code/",
                                   "flavor_id": "modelarts.vm.cpu.8u"}),
    "modelarts-lite": ("Huawei Cloud", {"region": "cn-north-4", "cluster_id": "0123abcd-0000-0000-0000-000000000000"}),
    "kubeflow": ("Kubernetes", {}),
    "volcano": ("Kubernetes", {}),
}
CREDENTIAL_VARS = ("AWS_", "AZURE_", "TENCENTCLOUD_", "HUAWEICLOUD_", "TKE_", "KUBECONFIG", "IDENTITY_", "MSI_",
                   "KUBERNETES_SERVICE")
# what a credential chain itself may ask while looking (never a platform's API)
METADATA = re.compile(r"^GET (http://metadata\.tencentyun\.com/|(http://127\.0\.0\.1:\d+)?/metadata/identity/)")


class Listener:
    """Records the first line of every request made to it, answers nothing."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.requests = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self.requests.append(conn.recv(4096).decode("latin-1").split("\r\n", 1)[0])
                except OSError:
                    self.requests.append("<no request line>")


@pytest.fixture(scope="module")
def listener():
    listener = Listener()
    yield listener
    listener.sock.close()


def bare_env(tmp_path, port: int) -> dict:
    env = {k: v for k, v in cli_env().items() if not k.upper().startswith(CREDENTIAL_VARS) and "PROXY" not in k.upper()}
    proxy = f"http://127.0.0.1:{port}"
    env.update(HOME=str(tmp_path / "empty-home"), AWS_EC2_METADATA_DISABLED="true", HTTP_PROXY=proxy,
               HTTPS_PROXY=proxy, http_proxy=proxy, https_proxy=proxy, AZURE_POD_IDENTITY_AUTHORITY_HOST=proxy,
               CLOUDTRAIN_HOME=str(tmp_path / "ct-home"))
    (tmp_path / "empty-home").mkdir()
    return env


@pytest.mark.parametrize("provider", sorted(CASES))
def test_no_credentials_is_exit_3_with_one_shape_and_nothing_sent(provider, tmp_path, listener):
    platform, options = CASES[provider]
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('hi')\n")
    job = write_job(tmp_path, """
        name: creds
        code: code
        command: python train.py
        image: python:3.11
        distribution: {type: ddp, nodes: 2}
        """)
    sets = [f"--set=providers.{provider}.{k}={v}" for k, v in options.items()]
    before = len(listener.requests)
    proc = subprocess.run([sys.executable, "-m", "cloudtrain", "submit", "-p", provider, str(job), *sets],
                          env=bare_env(tmp_path, listener.port), cwd=tmp_path, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 3, proc.stderr
    match = SHAPE.search(proc.stderr)
    assert match and match.group("platform") == platform, proc.stderr
    sent = [r for r in listener.requests[before:] if not METADATA.match(r)]
    assert sent == [], sent
