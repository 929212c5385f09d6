"""The Kubernetes providers' typed request (issue 29): ``render`` hands ``submit`` a ``KubeRequest``
whose fields ``_create`` reads (the job object, the launcher's ConfigMap, the job's Secret, the
code's object), never an artifact searched by kind; stored code is a ``code_upload`` that core ships,
and the pods' URL is made from where core shipped it (``Placeholder.CODE_URL`` filled in)."""
import hashlib
import json
import os
from dataclasses import replace

import pytest

from cloudtrain.transfer import shipping
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain.providers.request import Placeholder, fill
from cloudtrain_kubernetes import manifests as m
from cloudtrain_kubernetes.render import InlineCode, KubeRequest, StoredCode
from conftest import write_job

STORE = "s3://ct-code-store/team/code"
PROVIDERS = {"kubeflow": {}, "kubeflow-trainer": {}, "volcano": {}, "eks": {"cluster": "c", "region": "us-east-1"},
             "modelarts-lite": {"cluster_id": "x", "region": "cn-north-4"}}
WORKLOAD = {"kubeflow": "PyTorchJob", "kubeflow-trainer": "TrainJob", "volcano": "Job", "eks": "PyTorchJob",
            "modelarts-lite": "Job"}


def job_file(tmp_path, provider, size, **options):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text("print('trained')\n")
    (code / "weights.bin").write_bytes(os.urandom(size))  # incompressible: the archive is as large
    options = json.dumps({**PROVIDERS[provider], **options})
    return write_job(tmp_path, f"""
        name: typed
        code: code
        command: python train.py
        image: registry.example/train:1
        secrets: {{HF_TOKEN: {{from_env: CT_TYPED_SECRET}}}}
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        providers: {{{provider}: {options}}}
        """)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_stored_code_is_a_typed_upload_that_core_ships(tmp_path, provider):
    path = job_file(tmp_path, provider, 1000 * 1024, code_store=STORE, code_store_endpoint="http://127.0.0.1:9000",
                    code_url_expires="2h")
    rendered = get_provider(provider).render(load_job(path))
    request = rendered.request
    assert isinstance(request, KubeRequest)
    sha = hashlib.sha256(shipping.packed_code(load_job(path))).hexdigest()
    # each object in its field, and the artifacts (what a render prints) derived from them in create order
    assert request.workload["kind"] == WORKLOAD[provider]
    assert request.secret["metadata"]["name"] == "typed-secrets" and request.secret["stringData"] == {"HF_TOKEN": "***"}
    assert request.launcher["metadata"]["name"] == "typed-launcher"
    assert isinstance(request.code, StoredCode) and request.code.secret["metadata"]["name"] == "typed-code-url"
    assert [a.content for a in rendered.artifacts[1:]] == [request.secret, request.launcher, request.code.secret,
                                                           request.workload]
    assert request.spec_hash == request.workload["metadata"]["annotations"][m.ANNOTATION_HASH]
    # what core ships: the content-addressed object the render names, with the store's endpoint
    upload = request.code_upload
    assert upload.url == f"{STORE}/cloudtrain-code/{sha}.tar.gz" and upload.endpoint == "http://127.0.0.1:9000"
    assert upload.region == PROVIDERS[provider].get("region")  # eks: its region; unset ones are boto3's, at submit
    assert request.code.expires == 7200
    # the URL the pods read is made from where core shipped it: the one placeholder, filled by core's fill
    assert request.code.shipped == Placeholder.CODE_URL
    filled = fill(request, {Placeholder.CODE_URL: upload.url, Placeholder.SPEC_HASH: "0" * 64})
    assert filled.code.shipped == upload.url and filled.workload == request.workload


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_code_that_fits_travels_in_the_request_with_nothing_to_upload(tmp_path, provider):
    request = get_provider(provider).render(load_job(job_file(tmp_path, provider, 1024))).request
    assert isinstance(request.code, InlineCode) and request.code_upload is None
    assert request.code.configmap["metadata"]["name"] == "typed-code"
    assert request.code.configmap["binaryData"][m.CODE_KEY] == request.code.payload.placeholder
    no_code = load_job(job_file(tmp_path, provider, 1024), overrides={"code": None})
    request = get_provider(provider).render(no_code).request
    assert request.code is None and request.code_upload is None
    assert [o["kind"] for o in request.objects()] == ["Secret", "ConfigMap", WORKLOAD[provider]]


def test_eks_renders_without_asking_boto3_for_a_region(tmp_path, monkeypatch):
    """The store's region unset: the render leaves it to submit (``EksProvider.code_store``), so
    that rendering stays offline and free of boto3."""
    path = job_file(tmp_path, "eks", 1000 * 1024, code_store=STORE, region=None)
    provider = get_provider("eks")

    def no_session():
        raise AssertionError("render asked boto3 for a session")

    monkeypatch.setattr(provider, "_session", no_session)
    assert provider.render(load_job(path)).request.code_upload.region is None


def test_eks_ships_stored_code_to_the_sessions_region_when_unset(tmp_path):
    """At submit (``code_store``), the store is S3 in boto3's region: what the render left unset."""
    import boto3
    from cloudtrain_aws.eks import EksProvider
    path = job_file(tmp_path, "eks", 1000 * 1024, code_store=STORE, region=None)
    provider = EksProvider(session=boto3.session.Session(region_name="eu-west-3", aws_access_key_id="k",
                                                         aws_secret_access_key="s"))
    upload = provider.render(load_job(path)).request.code_upload
    assert provider.code_store(upload).region == "eu-west-3"
    assert provider.code_store(replace(upload, region="ap-south-1")).region == "ap-south-1"  # the job's wins
