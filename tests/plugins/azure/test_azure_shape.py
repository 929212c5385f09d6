"""The azure plugin's shape (issue 29): the provider renders a typed request that a submit reads
(no lookup by kind), implements the platform's calls only, and translates Azure's errors in one
place (``cloudtrain_azure.sdk.azure_errors``)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from azure.ai.ml.exceptions import ErrorCategory, ErrorTarget, ValidationException
from azure.core.exceptions import (ClientAuthenticationError, HttpResponseError, ResourceNotFoundError,
                                   ServiceRequestError)

from cloudtrain.providers.cloud import CloudProvider
from cloudtrain.spec.errors import BadInput, JobNotFound, PlatformError
from cloudtrain.extend.plugins import get_provider
from cloudtrain_azure import render as azure_render
from cloudtrain_azure import sdk
from cloudtrain_azure.provider import AzureProvider
from test_azure_render import make_job

ROOT = Path(__file__).resolve().parents[3]


def test_the_provider_implements_platform_calls_and_no_step_of_the_template():
    own = set(vars(AzureProvider))
    assert not own & {"schedule", "submit", "cancel", "status", "logs", "ship", "ship_code", "spec_hash",
                      "artifacts"}
    for step in ("render_request", "_find_by_spec", "_create", "_describe", "_to_status", "_stop", "_log_chunks",
                 "list", "outputs"):
        assert step in own, step
    assert issubclass(AzureProvider, CloudProvider)


def test_render_is_the_typed_request_and_what_it_prints_is_derived_from_it(tmp_path):
    rendered = get_provider("azure").render(make_job(tmp_path))
    request = rendered.request
    assert isinstance(request, azure_render.AzureRequest)
    assert request.code_upload is None  # Azure ML's SDK uploads the code (jobs.create_or_update)
    [artifact] = rendered.artifacts
    assert (artifact.kind, artifact.name, artifact.content) == ("azureml/job", "azure-ddp", request.job)


def test_what_a_submit_sends_is_the_render_named_tagged_and_staged_for_its_spec(tmp_path):
    job = make_job(tmp_path, env={"NCCL_IB_DISABLE": "0", "OMP_NUM_THREADS": "1"})
    request = get_provider("azure").render(job).request
    before = repr(request.job)
    spec = "ab" * 32
    sent = request.submitted(spec, tmp_path / "staged", {"NCCL_IB_DISABLE": "1", "UCX_TLS": "rc"})
    assert sent["name"] == request.job_name(spec) == f"azure-ddp-{spec[:10]}"
    assert sent["tags"]["cloudtrain.spec"] == spec and sent["tags"]["cloudtrain.job"] == "azure-ddp"
    assert sent["code"] == str(tmp_path / "staged")
    env = sent["environment_variables"]
    assert env["NCCL_IB_DISABLE"] == "0"  # the job's own value wins over a preset
    assert env["UCX_TLS"] == "rc" and env["OMP_NUM_THREADS"] == "1"
    # everything else is the render's, and the render itself is left as it was
    rest = {k: v for k, v in sent.items() if k not in ("name", "tags", "code", "environment_variables")}
    assert rest == {k: v for k, v in request.job.items() if k not in ("tags", "code", "environment_variables")}
    assert repr(request.job) == before


def test_the_plugin_imports_no_azure_sdk_until_it_calls_azure():
    code = ("import sys; import cloudtrain_azure.provider, cloudtrain_azure.render, cloudtrain_azure.sdk, "
            "cloudtrain_azure.options; print(sorted(m for m in sys.modules if m == 'azure' or m.startswith('azure.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": f"{ROOT / 'core'}:{ROOT / 'plugins'}", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]"


def test_stage_says_azure_uploads_the_code_itself(tmp_path):
    with pytest.raises(BadInput, match="uploads the job's code"):
        get_provider("azure").ship_code(get_provider("azure").render(make_job(tmp_path)))


# -- the one error translator -------------------------------------------------------------------
def refused(cls, status: int, request_id: str = "req-1", **kwargs):
    exc = cls(message="the service said no", **kwargs)
    exc.status_code = status
    exc.response = SimpleNamespace(headers={"x-ms-request-id": request_id})
    return exc


def raised(exc, **kwargs):
    with pytest.raises(Exception) as info:
        with sdk.azure_errors("reading job j", **kwargs):
            raise exc
    return info.value


def test_a_refusal_is_a_platform_error_with_the_fix_and_the_request_id():
    error = raised(refused(HttpResponseError, 403, "req-403"))
    assert isinstance(error, PlatformError) and error.request_id == "req-403"
    assert "reading job j" in str(error) and "AzureML Data Scientist" in str(error)
    assert "throttled" in str(raised(refused(HttpResponseError, 429)))
    assert "az login" in str(raised(ClientAuthenticationError(message="expired")))
    unreachable = raised(ServiceRequestError(message="no route"))
    assert isinstance(unreachable, PlatformError) and "network" in str(unreachable)


def test_nothing_found_is_the_callers_fix_or_the_callers_error():
    error = raised(refused(ResourceNotFoundError, 404, "req-404"), not_found="fix providers.azure.compute")
    assert isinstance(error, PlatformError) and error.request_id == "req-404"
    assert "; fix providers.azure.compute" in str(error)
    missing = JobNotFound("no azure job 'j'")
    assert raised(refused(ResourceNotFoundError, 404), not_found=missing) is missing


def test_the_sdks_refusal_of_what_the_user_gave_is_bad_input():
    invalid = ValidationException(message="bad field", no_personal_data_message="bad field",
                                  target=ErrorTarget.JOB, error_category=ErrorCategory.USER_ERROR)
    assert isinstance(raised(invalid), BadInput)
    error = raised(ValueError("line one\nline two"), invalid="the job YAML is wrong: {}; fix it")
    assert isinstance(error, BadInput) and str(error) == "the job YAML is wrong: line one; fix it"


def test_an_error_that_is_not_azures_passes_through():
    assert isinstance(raised(KeyError("k")), KeyError)
    assert isinstance(raised(JobNotFound("gone"), invalid="{}"), JobNotFound)
