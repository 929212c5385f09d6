"""Failover across providers: ``-p sagemaker,azure,tione`` (or a profile's ``providers: [...]``).

``validate`` and ``render`` cover every candidate, in order; ``submit`` renders every one first
(bad input anywhere: exit 2, nothing sent), then sends to each in turn and moves to the next
only when the platform refused for capacity or quota, by its own error code; it
says why in one line, and stops on any other error.  The ledger records the provider that ran
the job and, in ``tried``, the ones that refused it.

The codes are the platform's facts: each provider class gives them, with where the platform
documents them, as ``capacity_codes`` (and ``quota_worded_codes``: a code that is a quota refusal
only when its message says so); ``refused_after_create`` marks a platform that accepts a job and
may then fail it for capacity before it starts (docs/plugins.md, "The provider class").
A provider may answer itself with a classmethod ``is_capacity_refusal(exc) -> bool``.
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional

QUOTA_WORDS = re.compile(r"quota|exceed", re.IGNORECASE)


def candidates(spec: Optional[str]) -> List[str]:
    """``a,b,c`` -> ``["a", "b", "c"]`` (each once, in order)."""
    out: List[str] = []
    for name in (spec or "").split(","):
        name = name.strip()
        if name and name not in out:
            out.append(name)
    return out


def _causes(exc: Optional[BaseException]) -> Iterable[BaseException]:
    """``exc`` and what it was raised from or while handling (a plugin's ``raise ... from None``
    keeps the SDK's exception as ``__context__``)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def platform_code(exc: BaseException) -> Optional[str]:
    """The platform's own error code behind ``exc``: botocore's ``ClientError``, Tencent Cloud's
    ``TencentCloudSDKException``, Huawei Cloud's ``ServiceResponseException``, Azure's
    ``HttpResponseError``; None when there is none."""
    for cause in _causes(exc):
        response = getattr(cause, "response", None)
        if isinstance(response, dict) and isinstance(response.get("Error"), dict):
            return str(response["Error"].get("Code") or "") or None
        for attribute in ("error_code", "code"):  # huaweicloudsdkcore, tencentcloud
            value = getattr(cause, attribute, None)
            if isinstance(value, str) and value:
                return value
        error = getattr(cause, "error", None)  # azure.core: an ODataV4Format
        if error is not None and isinstance(getattr(error, "code", None), str):
            return error.code
    return None


def is_capacity_refusal(provider: str, exc: BaseException) -> bool:
    """Whether ``provider`` refused for capacity or quota (its class's ``capacity_codes`` and
    ``quota_worded_codes``; the class's own ``is_capacity_refusal`` when it has one)."""
    from ..spec.errors import PlatformError
    if not isinstance(exc, PlatformError):
        return False
    from ..extend.plugins import get_provider_class
    cls = get_provider_class(provider)
    own = getattr(cls, "is_capacity_refusal", None)
    if callable(own):
        return bool(own(exc))
    code = platform_code(exc)
    if code is None:
        return False
    if code in cls.capacity_codes:
        return True
    return code in cls.quota_worded_codes and bool(QUOTA_WORDS.search(str(exc)))


def failed_for_capacity(provider: str, status) -> bool:
    """A job that ended before it started, for want of capacity (e.g. SageMaker's
    ``CapacityError``, spot capacity lost before start): its message names one of the codes."""
    if status.state.value != "FAILED" or status.started_at is not None:
        return False
    from ..extend.plugins import get_provider_class
    codes = get_provider_class(provider).capacity_codes
    return any(code in (status.message or "") for code in codes)


def reason(provider: str, exc: BaseException) -> str:
    """One line: why ``provider`` was passed over."""
    code = platform_code(exc) or "refused"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{provider}: {code}" + (f" ({text[:160]})" if text else "")


def refused_before_start(run, sleep=None) -> Optional[str]:
    """Watch ``run`` until it starts (None: it runs there) or ends before it started for want of
    capacity (the reason line: move on); any other end is the job's own (None)."""
    import time
    sleep = sleep or time.sleep
    while True:
        status = run.status()
        if failed_for_capacity(run.provider.name, status):
            return f"{run.provider.name}: {status.message.splitlines()[0][:200]} ({run.handle}, before it started)"
        if status.terminal or status.started_at is not None or status.state.value == "RUNNING":
            return None
        sleep(max(run.provider.status_poll, 0.05))
