"""Tencent Cloud credentials for TI-ONE and COS: the SDK's default chain, once, with a short
timeout on the CVM role's metadata request (off Tencent Cloud it would hang for minutes)."""
from __future__ import annotations

import socket

from cloudtrain.errors import MissingCredentials

LOOKED_IN = ("TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY, ~/.tencentcloud/credentials, "
             "/etc/tencentcloud/credentials, the CVM role at metadata.tencentyun.com, the TKE OIDC role "
             "from TKE_* variables")
FIX = ("export TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY (an API key of a CAM user allowed to use "
       "TI-ONE and the COS bucket), or write them to ~/.tencentcloud/credentials")


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
