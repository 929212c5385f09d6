"""TI-ONE's SDK, in one place: the credentials, the ``TioneClient`` per region, the request
models, and THE error translator of the plugin (``api_error``: TI-ONE's API and COS's alike).

``tencentcloud-sdk-python-tione`` (API 2021-11-11) is imported on first use, never at import.
The credentials are the Tencent Cloud SDK's default chain (TI-ONE's and COS's alike: the COS SDK
reads the same credential object), looked up once, with a short timeout on the CVM role's
metadata request (off Tencent Cloud it would hang for minutes).
"""
from __future__ import annotations

import os
import socket
import warnings
from typing import Any, Callable, Dict, Optional, Tuple

from cloudtrain.spec.errors import BadInput, MissingCredentials, MissingExtra, PlatformError

SDK = "tencentcloud.tione.v20211111"
ENDPOINT_VAR = "CLOUDTRAIN_TIONE_ENDPOINT"
COS_ENDPOINT_VAR = "CLOUDTRAIN_COS_ENDPOINT"

LOOKED_IN = ("TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY, ~/.tencentcloud/credentials, "
             "/etc/tencentcloud/credentials, the CVM role at metadata.tencentyun.com, the TKE OIDC role "
             "from TKE_* variables")
FIX = ("export TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY (an API key of a CAM user allowed to use "
       "TI-ONE and the COS bucket), or write them to ~/.tencentcloud/credentials")

# Where a message about an API error points the user, by error-code prefix (first match wins).
FIXES = (
    ("AuthFailure", "check TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY (or ~/.tencentcloud/credentials) "
                    "and the account's CAM permissions for TI-ONE"),
    ("UnauthorizedOperation", "grant the account's CAM user TI-ONE permissions (QcloudTIONEFullAccess)"),
    ("ResourceNotFound", "check the handle and its region (cloudtrain list -p tione shows the tasks)"),
    ("ResourceInsufficient", "ask for more quota, or use fewer nodes or a smaller instance type"),
    ("OperationDenied.BalanceInsufficient", "top up the account, then submit again"),
    ("OperationDenied", "the account or resource group does not allow this; see the message"),
    ("InvalidParameter", "fix the request: cloudtrain render -p tione shows it; check providers.tione"),
    ("MissingParameter", "fix the request: cloudtrain render -p tione shows it; check providers.tione"),
    ("LimitExceeded", "wait and try again, or ask for a higher limit"),
    ("RequestLimitExceeded", "too many requests: wait a moment and try again"),
    ("ClientNetworkError", f"cannot reach the TI-ONE API: check the network, the region, or {ENDPOINT_VAR}"),
    ("ServerNetworkError", f"the TI-ONE API answered with an HTTP error: check the region or {ENDPOINT_VAR}"),
)


# Where a message about a COS error points the user, by error code.
COS_FIXES = {
    "AccessDenied": "grant the CAM user access to the bucket (e.g. QcloudCOSDataFullControl) and check the credentials",
    "InvalidAccessKeyId": "check TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY (or ~/.tencentcloud/credentials)",
    "SignatureDoesNotMatch": "check TENCENTCLOUD_SECRET_KEY (or ~/.tencentcloud/credentials) and the machine's clock",
    "RequestTimeTooSkewed": "set the machine's clock right (NTP)",
    "NoSuchBucket": "check the bucket (cos://BUCKETNAME-APPID/...) and its region (providers.tione.region)",
    "NoSuchKey": "check the path; cloudtrain outputs lists what the job wrote once it has ended",
}


def sdk_errors() -> tuple:
    """The exception classes ``api_error`` translates: the Tencent Cloud SDK's, and the COS
    SDK's when it is installed."""
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
    try:
        from qcloud_cos.cos_exception import CosClientError, CosServiceError
    except ImportError:
        return (TencentCloudSDKException,)
    return (TencentCloudSDKException, CosServiceError, CosClientError)


def api_error(exc, doing: str, service: str = "TI-ONE") -> PlatformError:
    """An SDK's exception as one line with the code, the message, the fix and the request id:
    COS's ``CosServiceError`` / ``CosClientError`` ("DOING: COS refused: ..."), and a
    ``TencentCloudSDKException`` from TI-ONE's API ("TI-ONE refused DOING: ...") or, with
    ``service="COS"``, from reading the credentials a COS client signs with."""
    kind = type(exc).__name__
    if kind == "CosServiceError":
        code, message, request = exc.get_error_code(), exc.get_error_msg(), exc.get_request_id()
        if code == "Unknown":  # the SDK's word for an error body it could not read
            code, message, request = f"HTTP {exc.get_status_code()}", str(exc.get_origin_msg())[:200], None
        fix = COS_FIXES.get(code, "see COS's error codes")
        return PlatformError(f"{doing}: COS refused: {code}: {message}; {fix}", request_id=request)
    if kind == "CosClientError":
        return PlatformError(f"{doing}: {exc}; check the network, the region and {COS_ENDPOINT_VAR}")
    if service == "COS":
        return PlatformError(f"{doing}: {exc.get_code()}: {exc.get_message()}; check the Tencent Cloud credentials")
    code = exc.get_code() if hasattr(exc, "get_code") else None
    message = exc.get_message() if hasattr(exc, "get_message") else str(exc)
    fix = next((f for prefix, f in FIXES if code and code.startswith(prefix)), "see TI-ONE's error codes")
    return PlatformError(f"TI-ONE refused {doing}: {code or 'error'}: {message}; {fix}",
                         request_id=exc.get_request_id() if hasattr(exc, "get_request_id") else None)


# Where ``DefaultCredentialProvider`` looks (tencentcloud/common/credential.py: EnvironmentVariable-,
# Profile- (~/.tencentcloud/credentials, /etc/tencentcloud/credentials), CVMRole- and
# DefaultTkeOIDCRoleArnProvider), looked at offline for ``cloudtrain doctor``: names and files, never values.
def offline_credentials() -> Tuple[bool, str]:
    """``(found, where)`` of the credentials ``default_credential`` would find, offline."""
    from cloudtrain.input.credsources import env_set, file_at
    if env_set("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY"):
        return True, "TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY in the environment"
    for path in ("~/.tencentcloud/credentials", "/etc/tencentcloud/credentials"):
        if file_at(path):
            return True, f"{os.path.expanduser(path)}"
    if os.environ.get("TKE_ROLE_ARN") or os.environ.get("TKE_WEB_IDENTITY_TOKEN_FILE"):
        return True, "the TKE OIDC role (TKE_* variables)"
    return False, ("none found (looked in: TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY, "
                   "~/.tencentcloud/credentials, /etc/tencentcloud/credentials, TKE_* variables; a CVM role is "
                   "not checked offline); export TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY")


def require_sdk(module: str):
    """Import ``module`` of the plugin's SDKs, or raise ``MissingExtra`` naming the extra that brings
    it: what ``TioneProvider.require_sdk`` does, for the modules that have no provider class at hand
    (the COS store, the catalog's refresh) and must not import ``provider.py``."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        from cloudtrain.extend import registry
        hint = registry.install_hint(registry.PROVIDER, "tione") or "pip install 'cloudtrain[tione]'"
        raise MissingExtra("tione", hint, module) from None


def default_credential():
    """The first credential of ``DefaultCredentialProvider`` (env, profile files, CVM role, TKE
    role); it has ``secret_id``, ``secret_key`` and ``token``, which the COS SDK also reads."""
    from tencentcloud.common import credential as tc_credential
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
    before = socket.getdefaulttimeout()
    socket.setdefaulttimeout(3)
    try:
        return tc_credential.DefaultCredentialProvider().get_credential()
    except (TencentCloudSDKException, OSError) as exc:
        # OSError: the TKE role provider, last in line, found no TKE_* variables;
        # ClientSideError: the chain's own "no valid credential" (nothing else raises it)
        if isinstance(exc, OSError) or exc.get_code() == "ClientSideError":
            raise MissingCredentials("Tencent Cloud", LOOKED_IN, FIX) from None
        raise
    finally:
        socket.setdefaulttimeout(before)


def load(model, params: dict):
    """``model._deserialize(params)``, refusing fields the installed SDK does not know."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model._deserialize(params)
    useless = [str(w.message) for w in caught if "fileds are useless" in str(w.message)]
    if useless:
        raise BadInput(f"the installed TI-ONE SDK does not know these {type(model).__name__} fields: "
                       f"{'; '.join(useless)}; upgrade it: pip install -U tencentcloud-sdk-python-tione")
    return model


class TioneApi:
    """TI-ONE's API: ``call`` one action in a region, through a ``TioneClient`` per region
    (or the injected ``client``, for every region), with the injected ``credential`` or the
    default chain's; ``endpoint`` (``http://127.0.0.1:PORT`` or a host, default
    ``$CLOUDTRAIN_TIONE_ENDPOINT``) sends every request there.  ``require_sdk`` imports a module
    of the SDK or says which extra installs it (the provider's ``require_sdk``)."""

    def __init__(self, require_sdk: Callable[[str], Any], client=None, credential=None,
                 endpoint: Optional[str] = None):
        self._require_sdk = require_sdk
        self._client, self._credential, self._endpoint = client, credential, endpoint
        self._clients: Dict[str, Any] = {}

    def credential(self):
        """The injected credential, else the SDK's default chain (TI-ONE's and COS's alike)."""
        if self._credential is None:
            self._require_sdk(SDK)
            from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
            try:
                self._credential = default_credential()
            except TencentCloudSDKException as exc:
                raise api_error(exc, "the credentials") from None
        return self._credential

    def client(self, region: str):
        if self._client is not None:
            return self._client
        if region in self._clients:
            return self._clients[region]
        self._require_sdk(SDK)
        from tencentcloud.common.profile.client_profile import ClientProfile
        from tencentcloud.common.profile.http_profile import HttpProfile
        from tencentcloud.tione.v20211111 import tione_client
        cred = self.credential()
        endpoint = self._endpoint or os.environ.get(ENDPOINT_VAR)
        scheme, sep, host = (endpoint or "").partition("://")
        http = HttpProfile(protocol=scheme if sep else None, endpoint=(host if sep else endpoint or "").rstrip("/")
                           or None, reqTimeout=30)
        self._clients[region] = tione_client.TioneClient(cred, region, ClientProfile(httpProfile=http))
        return self._clients[region]

    def call(self, region: str, action: str, params: dict, doing: str):
        """One API call: ``params`` loaded into the action's request model, errors as PlatformError."""
        self._require_sdk(SDK)
        from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
        from tencentcloud.tione.v20211111 import models
        req = getattr(models, f"{action}Request")()
        load(req, params)
        try:
            return getattr(self.client(region), action)(req)
        except TencentCloudSDKException as exc:
            raise api_error(exc, doing) from None
