"""Huawei Cloud SDK plumbing shared by ``modelarts`` and ``modelarts-lite``: credentials,
regions, clients, request models built from rendered bodies, and API errors as ``PlatformError``.

Nothing here imports an SDK at module import time; every SDK import happens when a client or a
model is first needed (``Provider.require_sdk`` names the extra when it is missing).
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional, Tuple, Union

from cloudtrain.spec.errors import BadInput, MissingCredentials, MissingExtra, PlatformError

EXTRA = "modelarts"
INSTALL = "pip install 'cloudtrain[modelarts]'"
AK_ENV, SK_ENV = "HUAWEICLOUD_SDK_AK", "HUAWEICLOUD_SDK_SK"
PROJECT_ENV = "HUAWEICLOUD_SDK_PROJECT_ID"
REGION_ENV = "HUAWEICLOUD_SDK_REGION"
# (connect, read) seconds and retries of the SDK's HTTP client (it retries HTTP 429 only).
TIMEOUT = (10, 60)
RETRIES = 2


def require(module: str, provider: str):
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(provider, INSTALL, module) from None


def region_of(region: Optional[str]) -> str:
    region = region or os.environ.get(REGION_ENV)
    if not region:
        raise BadInput(f"no Huawei Cloud region: set the provider's `region` option or export {REGION_ENV} "
                       "(e.g. cn-southwest-2)")
    return region


# Where ``credentials`` finds the keys (huaweicloudsdkcore/auth/provider.py: EnvCredentialProvider's
# HUAWEICLOUD_SDK_AK/HUAWEICLOUD_SDK_SK, ProfileCredentialProvider's HUAWEICLOUD_SDK_CREDENTIALS_FILE,
# default ~/.huaweicloud/credentials), looked at offline for ``cloudtrain doctor``: names and files, never values.
def offline_credentials() -> Tuple[bool, str]:
    """``(found, where)`` of the keys ``credentials`` would read, offline."""
    from cloudtrain.input.credsources import env_set, file_at
    if env_set(AK_ENV, SK_ENV):
        return True, f"{AK_ENV} and {SK_ENV} in the environment"
    path = os.environ.get("HUAWEICLOUD_SDK_CREDENTIALS_FILE") or "~/.huaweicloud/credentials"
    if file_at(path):
        return True, os.path.expanduser(path)
    return False, f"none found (looked in: {AK_ENV}/{SK_ENV}, {path}); export {AK_ENV} and {SK_ENV}"


def credentials(provider: str, project_id: Optional[str] = None):
    """``BasicCredentials`` from ``HUAWEICLOUD_SDK_AK``/``_SK`` (or the SDK's profile file
    ``~/.huaweicloud/credentials``); the project id from the option, ``HUAWEICLOUD_SDK_PROJECT_ID``
    or the profile.  Without a project id the SDK asks IAM for the region's project."""
    require("huaweicloudsdkcore", provider)
    from huaweicloudsdkcore.auth.credentials import BasicCredentials
    from huaweicloudsdkcore.auth.provider import EnvCredentialProvider, ProfileCredentialProvider
    from huaweicloudsdkcore.exceptions.exceptions import SdkException
    creds = None
    if os.environ.get(AK_ENV) and os.environ.get(SK_ENV):
        creds = EnvCredentialProvider.get_basic().get_credentials()
    else:
        try:
            creds = ProfileCredentialProvider.get_basic().get_credentials()
        except (SdkException, ValueError, TypeError, OSError):  # no profile file, or an unreadable one
            creds = None
    if creds is None or not isinstance(creds, BasicCredentials):
        profile = os.environ.get("HUAWEICLOUD_SDK_CREDENTIALS_FILE") or "~/.huaweicloud/credentials"
        raise MissingCredentials("Huawei Cloud", f"{AK_ENV}/{SK_ENV}, {profile}",
                                 f"export {AK_ENV} and {SK_ENV} (an access key of an IAM user allowed to use "
                                 f"ModelArts), and {PROJECT_ENV} for the region's project")
    project = project_id or os.environ.get(PROJECT_ENV) or creds.project_id
    if project:
        creds.with_project_id(project)
    return creds


def http_config():
    from huaweicloudsdkcore.http.http_config import HttpConfig
    config = HttpConfig.get_default_config()
    config.timeout = TIMEOUT
    config.retry_times = RETRIES
    return config


def build_client(client_cls, region_cls, region: str, creds):
    """A client for ``region``: its public endpoint, or the one in the SDK's own override
    ``HUAWEICLOUD_SDK_REGION_<SERVICE>_<REGION>`` (e.g. a VPC endpoint)."""
    try:
        region_obj = region_cls.value_of(region)
    except KeyError:
        raise BadInput(f"unknown Huawei Cloud region {region!r} for {client_cls.__name__}; use one of "
                       f"{', '.join(sorted(region_cls.static_fields))}") from None
    return (client_cls.new_builder().with_http_config(http_config()).with_credentials(creds)
            .with_region(region_obj).build())


def modelarts_client(provider: str, region: str, project_id: Optional[str] = None):
    """A ``ModelArtsClient`` for ``region`` with the environment's credentials (``credentials``)."""
    v1 = require("huaweicloudsdkmodelarts.v1", provider)
    from huaweicloudsdkmodelarts.v1.region.modelarts_region import ModelArtsRegion
    return build_client(v1.ModelArtsClient, ModelArtsRegion, region, credentials(provider, project_id))


def cce_client(provider: str, region: str, project_id: Optional[str] = None):
    """A CCE ``CceClient`` for ``region`` (it issues a Lite pool's cluster certificates)."""
    require("huaweicloudsdkcce.v3", provider)
    from huaweicloudsdkcce.v3 import CceClient
    from huaweicloudsdkcce.v3.region.cce_region import CceRegion
    return build_client(CceClient, CceRegion, region, credentials(provider, project_id))


# -- errors: every failed Huawei Cloud call as PlatformError (exit 3), worded here once -------------
_FIXES = {
    401: "check HUAWEICLOUD_SDK_AK / HUAWEICLOUD_SDK_SK",
    403: "the access key's IAM user lacks permission, or the project id is of another region; "
         "check the user's ModelArts/CCE policies and HUAWEICLOUD_SDK_PROJECT_ID",
    404: "check the job handle (cloudtrain list -p <provider>) and the region",
    429: "the API is throttling requests; retry in a minute",
}
OBS_FIXES = {
    403: "the access key's IAM user may not use this bucket, or the key is wrong: check HUAWEICLOUD_SDK_AK/_SK "
         "and the bucket's policy (obs:object:PutObject/GetObject, obs:bucket:ListBucket)",
    404: "check the bucket's name and that it is in the store's region",
}
OVERRIDE = "HUAWEICLOUD_SDK_REGION_*"  # the SDKs' endpoint override variables
OBS_OVERRIDE = "HUAWEICLOUD_SDK_REGION_OBS_<REGION>"  # OBS' (obsstore.ENDPOINT_ENV)


def refused(service: str, action: str, status: int, code: Optional[str], message: str,
            request_id: Optional[str] = None) -> PlatformError:
    """The service answered ``action`` with an HTTP error: its code, message, request id, and the fix."""
    fixes = OBS_FIXES if service == "OBS" else _FIXES
    fix = fixes.get(status) or (f"{service} failed; retry later" if status >= 500 else
                                "fix the request as the message says")
    return PlatformError(f"{service} refused {action}: {code or 'HTTP %s' % status}: {message} (HTTP {status}); "
                         f"{fix}", request_id=request_id)


def unreachable(service: str, action: str, detail: str, override: str = OVERRIDE) -> PlatformError:
    """No answer to ``action`` (network, TLS, endpoint)."""
    return PlatformError(f"cannot reach {service} {action} ({detail}); check the network, the region and any "
                         f"{override} endpoint override")


@contextmanager
def api_errors(service: str, action: str) -> Iterator[None]:
    """The Huawei Cloud SDKs' exceptions (``huaweicloudsdkcore``: ModelArts, CCE) as ``PlatformError``."""
    from huaweicloudsdkcore.exceptions import exceptions as exc
    try:
        yield
    except exc.ServiceResponseException as e:
        raise refused(service, action, e.status_code, e.error_code, e.error_msg, e.request_id) from None
    except exc.RequestTimeoutException as e:
        raise PlatformError(f"{service} did not answer {action} in time ({e.error_msg}); check the network "
                            "and the region's endpoint, then retry") from None
    except exc.ConnectionException as e:
        raise unreachable(service, f"for {action}", e.error_msg) from None
    except exc.SdkException as e:
        raise PlatformError(f"{service} SDK error during {action}: {e.error_msg}; check the credentials and the "
                            "region") from None


@contextmanager
def obs_errors(store, what: str) -> Iterator[None]:
    """A request the OBS SDK (``esdk-obs-python``) could not make: it raises plain exceptions for
    transport failures (no network, TLS); its refusals are results (``obs_result``).  ``store``:
    the ``ObsStore``, whose ``server`` is read only when the call failed."""
    try:
        yield
    except PlatformError:
        raise
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise unreachable(f"OBS at {store.server}", f"to {what}", detail, OBS_OVERRIDE) from None


def obs_result(result, what: str, ok_missing: bool = False):
    """An OBS SDK result when it succeeded; None for a 404 with ``ok_missing``; else ``PlatformError``."""
    status = int(result.status or 0)
    if status < 300:
        return result
    if ok_missing and status == 404:
        return None
    raise refused("OBS", f"to {what}", status, result.errorCode, result.errorMessage or result.reason or "",
                  result.requestId)


# -- request models from rendered bodies --------------------------------------------------------
_PRIMITIVES: Dict[str, Union[type, Tuple[type, ...]]] = {"str": str, "int": int, "bool": bool, "float": (int, float),
                                                          "object": object}


def to_model(models, type_name: str, data: Any, path: str = "body"):
    """Build the SDK model ``type_name`` (e.g. ``Job``) from a JSON-like body, strictly: an
    unknown field or a value of the wrong type is a ``ValueError`` naming its path.  The SDK's
    own deserializer silently drops unknown fields; a request must not."""
    if data is None:
        return None
    if type_name.startswith("list["):
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a list, got {type(data).__name__}")
        inner = type_name[5:-1]
        return [to_model(models, inner, item, f"{path}[{i}]") for i, item in enumerate(data)]
    if type_name.startswith("dict("):
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping, got {type(data).__name__}")
        parts = re.match(r"dict\(([^,]*), (.*)\)", type_name)
        if parts is None:  # the SDK's openapi_types name every mapping dict(key, value)
            raise ValueError(f"{path}: the SDK's type {type_name!r} is not dict(key, value)")
        inner = parts.group(2)
        return {str(k): to_model(models, inner, v, f"{path}.{k}") for k, v in data.items()}
    if type_name in _PRIMITIVES:
        expected = _PRIMITIVES[type_name]
        wrong = not isinstance(data, expected) or (type_name == "int" and isinstance(data, bool))
        if expected is not object and wrong:
            raise ValueError(f"{path}: expected {type_name}, got {type(data).__name__} {data!r}")
        return data
    klass = getattr(models, type_name)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a {type_name} mapping, got {type(data).__name__}")
    by_json = {json_key: attr for attr, json_key in klass.attribute_map.items()}
    kwargs = {}
    for key, value in data.items():
        if key not in by_json:
            raise ValueError(f"{path}.{key}: not a field of {type_name} (fields: {', '.join(sorted(by_json))})")
        attr = by_json[key]
        kwargs[attr] = to_model(models, klass.openapi_types[attr], value, f"{path}.{key}")
    return klass(**kwargs)


def from_model(obj) -> Any:
    """The JSON body the SDK sends for a model (its own serializer)."""
    from huaweicloudsdkcore.utils.http_utils import sanitize_for_serialization
    return sanitize_for_serialization(obj)
