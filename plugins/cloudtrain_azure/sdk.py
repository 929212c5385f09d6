"""Azure's SDK for the ``azure`` provider: the workspace's ``MLClient``, the credential, the one
error translator (``azure_errors``), and the SDK calls the provider makes beyond ``MLClient``'s
public ones (``load_job``, the run-history log files).

Every azure import is inside a function: importing this module imports no SDK, so render and
validate (which find the workspace's config.json here) stay fast.
"""
from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple, Union

from cloudtrain.spec import yamlio
from cloudtrain.spec.errors import BadInput, MissingCredentials, PlatformError

# What a read that found nothing tells the user by default.
RECHECK = "re-check the name"
CONFIG_HELP = ("put the workspace's config.json (Azure portal > the workspace > Download config.json) in this "
               "directory or one above it")


# -- the one error translator -------------------------------------------------------------------
@contextlib.contextmanager
def azure_errors(what: str, not_found: Union[str, BaseException] = RECHECK,
                 invalid: Optional[str] = None) -> Iterator[None]:
    """Azure's errors while ``what`` as cloudtrain's: ``PlatformError`` (exit 3) with the code,
    the message, the request id and the fix; the SDK's refusal of what the user gave, ``BadInput``
    (exit 2).  The SDK's logging and deprecation warnings are kept off stderr meanwhile.

    ``not_found``: what a ``ResourceNotFoundError`` becomes: the fix of a ``PlatformError`` (a
    string), or the exception to raise instead (e.g. ``JobNotFound``).  ``invalid``: the input is
    cloudtrain's own (a rendered job YAML, a config.json), so any error raised over it is
    ``BadInput(invalid.format(first line of the error))``."""
    from azure.core.exceptions import (ClientAuthenticationError, HttpResponseError, ResourceNotFoundError,
                                       ServiceRequestError)
    try:
        with quiet_sdk():
            yield
    except (BadInput, PlatformError, MissingCredentials):
        raise
    except ClientAuthenticationError as exc:
        raise PlatformError(f"Azure refused the credentials while {what}: {first_line(exc)}; sign in again with "
                            "`az login`, or fix AZURE_TENANT_ID/AZURE_CLIENT_ID/AZURE_CLIENT_SECRET "
                            "(DefaultAzureCredential)", request_id=request_id(exc)) from None
    except ResourceNotFoundError as exc:
        if isinstance(not_found, BaseException):
            raise not_found from None
        raise PlatformError(f"Azure ML found nothing while {what}: {error_text(exc)}; {not_found}",
                            request_id=request_id(exc)) from None
    except HttpResponseError as exc:
        fix = {401: "sign in again (az login)", 403: "ask for a role on the workspace (AzureML Data Scientist)",
               429: "wait and try again (throttled)"}.get(exc.status_code or 0, "fix the request or try again later")
        raise PlatformError(f"Azure ML refused {what}: {error_text(exc)}; {fix}", request_id=request_id(exc)) from None
    except ServiceRequestError as exc:
        raise PlatformError(f"cannot reach Azure ML while {what}: {first_line(exc)}; check the network "
                            "(proxy, firewall) and try again") from None
    except Exception as exc:
        if invalid is not None:
            raise BadInput(invalid.format(first_line(exc))) from None
        from azure.ai.ml.exceptions import ErrorCategory, MlException
        if not isinstance(exc, MlException):
            raise
        if getattr(exc, "error_category", None) == ErrorCategory.USER_ERROR:
            raise BadInput(f"Azure ML's SDK refused {what}: {first_line(exc)}; fix the job file or "
                           "providers.azure") from None
        raise PlatformError(f"Azure ML failed while {what}: {first_line(exc)}; try again later") from None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else text


def error_text(exc) -> str:
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None) or getattr(exc, "reason", None) or exc.__class__.__name__
    message = getattr(error, "message", None) or first_line(exc)
    return f"{exc.status_code or ''} {code}: {message}".strip()


def request_id(exc) -> Optional[str]:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for key in ("x-ms-request-id", "x-request-id", "x-ms-client-request-id"):
        if headers.get(key):
            return headers[key]
    return None


# -- the workspace ------------------------------------------------------------------------------
def workspace_config(config_file: Optional[str], start: Optional[Path] = None) -> Optional[Path]:
    """The config.json MLClient.from_config would read: ``config_file`` (a file, or a directory
    to search from), else searched from the current directory up in .azureml/, aml_config/ and
    the directory itself (azure/ai/ml/_ml_client.py, ``from_config``: 20 levels)."""
    path = Path(config_file).expanduser() if config_file else (start or Path.cwd())
    if path.is_file():
        return path
    for sub in (".azureml", "aml_config", None):
        for name in ("config.json", "project.json"):
            for directory in [path.resolve(), *path.resolve().parents][:21]:
                found = directory / sub / name if sub else directory / name
                if found.is_file():
                    return found
    return None


def make_ml_client(credential, client_kwargs: Dict[str, Any], subscription_id: Optional[str],
                   resource_group: Optional[str], workspace: Optional[str], config_file: Optional[str],
                   submit: bool = False):
    """MLClient for a workspace given in full, or from the workspace's config.json
    (``credential`` None: ``DefaultCredential``); ``submit``: a job is at hand (a fix may name its
    options)."""
    from azure.ai.ml import MLClient
    if credential is None:
        credential = DefaultCredential()
    kwargs = dict(client_kwargs)
    kwargs.setdefault("show_progress", False)  # the upload's progress bar; the CLI has its own status line
    given = [v for v in (subscription_id, resource_group, workspace) if v]
    if given and len(given) < 3:
        raise BadInput("give all of providers.azure.subscription_id, resource_group and workspace, "
                       "or none of them (then the workspace's config.json is used)")
    if given:
        with quiet_sdk():
            return MLClient(credential, subscription_id, resource_group, workspace, **kwargs)
    fix = (f"set providers.azure.subscription_id, resource_group and workspace, or {CONFIG_HELP}" if submit
           else f"{CONFIG_HELP} (a handle names it in full: azure://SUBSCRIPTION/RESOURCE_GROUP/WORKSPACE/NAME)")
    # the SDK's ValidationException: no or bad config.json
    with azure_errors("reading the workspace's config.json", invalid="no Azure ML workspace ({}); " + fix):
        return MLClient.from_config(credential, path=config_file, **kwargs)


def job_scope(job_id: str) -> Tuple[Optional[Tuple[str, str, str]], str]:
    """A job id's workspace and name: ``sub/rg/ws/name`` -> ((sub, rg, ws), name); ``name`` -> (None, name)."""
    parts = job_id.split("/")
    if len(parts) == 4 and all(parts):
        return (parts[0], parts[1], parts[2]), parts[3]
    if len(parts) == 1 and parts[0]:
        return None, parts[0]
    raise BadInput(f"{job_id!r} is not an azure job id; expected SUBSCRIPTION/RESOURCE_GROUP/WORKSPACE/JOB "
                   "(cloudtrain list -p azure shows them)")


def job_id(ml, name: str) -> str:
    """The id of job ``name`` in ``ml``'s workspace (``job_scope`` reads it back)."""
    return f"{ml.subscription_id}/{ml.resource_group_name}/{ml.workspace_name}/{name}"


# -- the SDK's own job object and the logs ---------------------------------------------------------
def load_job(content: dict, path: Path):
    """The job YAML as the SDK's own job object (``azure.ai.ml.load_job``), written to ``path``."""
    from azure.ai.ml import load_job as sdk_load_job
    path.write_text(yamlio.dump(content))
    with azure_errors("loading the rendered job", invalid="Azure ML's SDK rejects the rendered job: {}; "
                                                          "check the job's providers.azure options"):
        return sdk_load_job(path)


def log_texts(ml, name: str, cursor: Dict[str, Any], pattern: "re.Pattern[str]") -> Dict[str, str]:
    """The text of each of the job's log files whose name matches ``pattern``, by name, through
    the run-history calls ``jobs.stream`` makes (it prints to stdout and cannot be iterated);
    ``cursor`` keeps the HTTP pipeline between calls."""
    from azure.ai.ml._utils.utils import create_requests_pipeline_with_retry, download_text_from_url
    if "pipeline" not in cursor:
        cursor["pipeline"] = create_requests_pipeline_with_retry(requests_pipeline=ml.jobs._requests_pipeline)
    with azure_errors(f"reading the logs of job {name}"):
        details = ml.jobs._runs_operations.get_run_details(name)
        files = {k: v for k, v in (details.log_files or {}).items() if pattern.match(k)}
        return {k: download_text_from_url(files[k], cursor["pipeline"]) for k in sorted(files)}


def run_error(ml, name: str) -> str:
    """The platform's words for a failed job: run history's ``RunDetails.error`` (what azure-ai-ml
    prints for a failed job, ``stream_logs_until_completion`` in azure/ai/ml/operations/
    _job_ops_helper.py): the root error's code, its inner errors' codes, then its message."""
    with azure_errors(f"reading why job {name} failed"):
        details = ml.jobs._runs_operations.get_run_details(name)
    root = getattr(getattr(details, "error", None), "error", None)
    if root is None:
        return ""
    words = [root.code]
    inner = root.inner_error
    while inner is not None:
        words.append(inner.code)
        inner = inner.inner_error
    return ": ".join(w for w in (*words, root.message) if w)


# -- the credential -------------------------------------------------------------------------------
# Where azure-identity's DefaultAzureCredential looks (its docs, "DefaultAzureCredential": the
# environment's service principal, EnvironmentCredential's AZURE_CLIENT_ID/AZURE_TENANT_ID/
# AZURE_CLIENT_SECRET or AZURE_CLIENT_CERTIFICATE_PATH; a managed identity, IDENTITY_ENDPOINT/
# MSI_ENDPOINT; the Azure CLI's login, its MSAL token cache in AZURE_CONFIG_DIR, default ~/.azure),
# looked at offline for ``cloudtrain doctor``: names and files, never values.
def offline_credentials() -> Tuple[bool, str]:
    """``(found, where)`` of the credentials ``DefaultCredential`` would use, offline."""
    import os
    from cloudtrain.input.credsources import env_set
    if env_set("AZURE_CLIENT_ID", "AZURE_TENANT_ID") and (os.environ.get("AZURE_CLIENT_SECRET")
                                                          or os.environ.get("AZURE_CLIENT_CERTIFICATE_PATH")):
        return True, "a service principal in the environment (AZURE_CLIENT_ID, AZURE_TENANT_ID, its secret)"
    config_dir = Path(os.path.expanduser(os.environ.get("AZURE_CONFIG_DIR") or "~/.azure"))
    if (config_dir / "msal_token_cache.json").is_file() or (config_dir / "msal_token_cache.bin").is_file():
        return True, f"`az login` ({config_dir})"
    if os.environ.get("IDENTITY_ENDPOINT") or os.environ.get("MSI_ENDPOINT"):
        return True, "a managed identity (IDENTITY_ENDPOINT)"
    return False, (f"none found (looked in: AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, "
                   f"`az login` in {config_dir}, a managed identity); run `az login`")


class DefaultCredential:
    """``DefaultAzureCredential`` that tells no credential anywhere (every credential of its chain
    raised ``CredentialUnavailableError``: ``MissingCredentials``, raised while the first request
    asks for a token, before it is sent) from one that was refused (``ClientAuthenticationError``)."""

    def __init__(self):
        from azure.identity import DefaultAzureCredential
        self._chain = DefaultAzureCredential()
        self._links = [_Link(c) for c in self._chain.credentials]
        self._chain.credentials = tuple(self._links)

    def get_token(self, *scopes, **kwargs):
        from azure.core.exceptions import ClientAuthenticationError
        for link in self._links:
            link.unavailable = False
        try:
            with quiet_identity():
                return self._chain.get_token(*scopes, **kwargs)
        except ClientAuthenticationError:
            if not all(link.unavailable for link in self._links):
                raise
        raise MissingCredentials(
            "Azure", "DefaultAzureCredential's " + ", ".join(link.name for link in self._links),
            "sign in with `az login`, or export AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (a service "
            "principal)")

    def close(self) -> None:
        self._chain.close()


class _Link:
    """One credential of the chain, noting whether it found nothing to use."""

    def __init__(self, credential):
        self.credential, self.unavailable = credential, False
        # a credential that failed to start stands in as FailedDACCredential, carrying its name
        self.name = getattr(credential, "_credential_name", None) or type(credential).__name__

    def get_token(self, *scopes, **kwargs):
        from azure.identity import CredentialUnavailableError
        try:
            return self.credential.get_token(*scopes, **kwargs)
        except CredentialUnavailableError:
            self.unavailable = True
            raise

    def __getattr__(self, name):
        return getattr(self.credential, name)


# -- keeping the SDK's noise off stderr ------------------------------------------------------------
@contextlib.contextmanager
def quiet_identity() -> Iterator[None]:
    """azure-identity's chain logs every credential it tried, with links, as a WARNING when none
    gave a token (``azure/identity/_credentials/chained.py``: ``_LOGGER.warning(message)``): Python's
    last-resort handler prints those ~15 lines on stderr before cloudtrain's own one line.  The
    caller says what happened (``MissingCredentials``, or the refusal's first line)."""
    import logging
    logger = logging.getLogger("azure.identity")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def quiet_sdk() -> Iterator[None]:
    """azure-ai-ml logs a warning for every experimental class it touches (and its marshmallow
    schemas warn of deprecations); keep stderr clean."""
    import logging
    import warnings
    logger = logging.getLogger("azure.ai.ml")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def stderr_of_upload() -> Iterator[None]:
    """The code upload prints colour codes to stderr even without a progress bar: drop them,
    pass anything else on."""
    import io
    import sys
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stderr(buffer):
            yield
    finally:
        text = re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())
        if text.strip():
            sys.stderr.write(text)
