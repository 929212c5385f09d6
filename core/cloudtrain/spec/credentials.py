"""Values that look like credentials, and where each kind belongs instead.

cloudtrain's settings files hold names (of profiles, roles, buckets, workspaces, secret sources),
never keys: the cloud SDKs find credentials through their own chains.  ``looks_like`` recognises
the shapes of the keys users paste by mistake (the vendors document them: AWS access key ids
start with AKIA/ASIA, "Understanding unique ID prefixes" in the IAM user guide; Tencent Cloud
SecretIds with AKID; an Azure client secret carries ``Q~`` after its first characters) and a
few names that only ever hold a secret.
"""
from __future__ import annotations

import re
from typing import Optional, Tuple

AWS = ("an AWS key", "AWS's credential chain: `aws configure` or `aws sso login`, AWS_PROFILE, or "
       "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the environment")
AZURE = ("an Azure client secret", "Azure's credential chain: `az login`, a managed identity, or "
         "AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET in the environment")
TENCENT = ("a Tencent Cloud API key", "TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY in the environment or "
           "~/.tencentcloud/credentials")
HUAWEI = ("a Huawei Cloud access key", "HUAWEICLOUD_SDK_AK/HUAWEICLOUD_SDK_SK in the environment or "
          "~/.huaweicloud/credentials")
GENERIC = ("a secret", "a secret source: the job file's `secrets: {NAME: {from_env: VAR}}` (or from_file), "
           "read on your machine at submit and never stored")
PRIVATE_KEY = ("a private key", "a file of its own, named by the option that takes its path")
TOKEN = ("an API token", GENERIC[1])

# Tokens whose vendors give them a recognisable prefix (GitHub: "Behind GitHub's new authentication
# token formats"; Hugging Face hf_; Slack xoxb-/xoxp-; GitLab glpat-; Google API keys AIza; OpenAI
# and Anthropic sk-; JSON Web Tokens: two base64url JSON parts, "eyJ" being '{"' encoded).  Found
# anywhere in a text: a value "Bearer ghp_..." is one too.
TOKEN_SHAPES = (
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}"), ("a GitHub token", GENERIC[1])),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), ("a GitHub token", GENERIC[1])),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), ("a Hugging Face token", GENERIC[1])),
    (re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"), ("a Slack token", GENERIC[1])),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), ("a GitLab token", GENERIC[1])),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), ("a Google API key", GENERIC[1])),
    # sk-, sk-proj-, sk-ant-api03-: long and of mixed case with digits (a name "sk-prod-cluster" is not one)
    (re.compile(r"\bsk-(?:[a-z0-9]+-)*(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[0-9])"
                r"[A-Za-z0-9_-]{32,}"), TOKEN),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), ("a JSON Web Token", GENERIC[1])),
    (re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"), AWS),
    (re.compile(r"\bAKID[A-Za-z0-9]{32}\b"), TENCENT),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), PRIVATE_KEY),
)

_SHAPES = (
    (re.compile(r"^(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}$"), AWS),
    (re.compile(r"^AKID[A-Za-z0-9]{32}$"), TENCENT),
    (re.compile(r"^[A-Za-z0-9_.\-~]{3}\dQ~[A-Za-z0-9_.\-~]{31,34}$"), AZURE),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), PRIVATE_KEY),
)
# 40 characters of base64 with upper, lower case and digits: an AWS secret access key or a Huawei SK
_SECRET_40 = re.compile(r"^[A-Za-z0-9/+]{40}$")
_HUAWEI_AK = re.compile(r"^[A-Z0-9]{20}$")
_URL_PASSWORD = re.compile(r"^[a-z][a-z0-9+.\-]*://[^/:@\s]+:([^/@\s]+)@")
# a URI's user info (RFC 3986 3.2.1: "scheme://user:password@host"), of any scheme, anywhere in a text
URI_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*)(://)([^/?#@\s]+)@")
# Azure Blob Storage and Data Lake Gen2 URIs name the container there: wasbs://<container>@<account>...
USERINFO_IS_A_NAME = ("wasb", "wasbs", "abfs", "abfss")


def _credential_userinfo(match) -> bool:
    scheme, info = match.group(1).lower(), match.group(3)
    return ":" in info or scheme not in USERINFO_IS_A_NAME
_SECRET_NAMES = {
    "aws_secret_access_key": AWS, "aws_access_key_id": AWS, "secret_access_key": AWS, "access_key_id": AWS,
    "aws_session_token": AWS, "client_secret": AZURE, "azure_client_secret": AZURE, "secret_id": TENCENT,
    "secret_key": TENCENT, "secretid": TENCENT, "secretkey": TENCENT, "ak": HUAWEI, "sk": HUAWEI,
    "access_key": GENERIC, "password": GENERIC, "passwd": GENERIC, "token": GENERIC, "api_key": GENERIC,
    "apikey": GENERIC, "private_key": PRIVATE_KEY,
}


def _mixed(text: str) -> bool:
    return any(c.islower() for c in text) and any(c.isupper() for c in text) and any(c.isdigit() for c in text)


def looks_like(value, name: Optional[str] = None) -> Optional[Tuple[str, str]]:
    """``(what it looks like, where it belongs)`` when ``value`` (or the key ``name`` it is
    given under) looks like a credential; else None."""
    if name is not None and str(name).lower() in _SECRET_NAMES:
        return _SECRET_NAMES[str(name).lower()]
    if not isinstance(value, str):
        return None
    text = value.strip()
    for shape, kind in _SHAPES + TOKEN_SHAPES:
        if shape.search(text):
            return kind
    if _SECRET_40.match(text) and _mixed(text):
        return AWS if "/" in text or "+" in text else (AWS[0] + " or " + HUAWEI[0], AWS[1] + "; " + HUAWEI[1])
    if _HUAWEI_AK.match(text) and any(c.isdigit() for c in text) and any(c.isalpha() for c in text):
        return HUAWEI
    if _URL_PASSWORD.match(text):
        return ("a password in a URL", "the service's own credential store; give the URL without user:password")
    return None


def refusal(value, name: Optional[str] = None) -> Optional[str]:
    """The message refusing to keep ``value`` in a settings file, or None when it is fine."""
    found = looks_like(value, name)
    if found is None:
        return None
    what, where = found
    return (f"looks like {what}; cloudtrain keeps no credentials in its settings: put it in {where}, "
            "and give cloudtrain only names (profiles, roles, secret sources)")


def masked(value) -> str:
    """``value`` for display: a credential-looking one as ``***``; a URL's password hidden."""
    if looks_like(value) is None:
        return value
    match = _URL_PASSWORD.match(value.strip()) if isinstance(value, str) else None
    if match:
        return value.replace(":" + match.group(1) + "@", ":***@", 1)
    return "***"


# the words a setting's name ends with when its value is a secret: client_secret, api_key,
# access_token, db_password; not key_name, kms_key_id, password_file, image_pull_secrets (names),
# nor a bare "key" (a toleration's or a tag's key is a name)
SECRET_WORDS = {"secret", "password", "passwd", "pwd", "passphrase", "token", "key", "apikey", "privatekey",
                "credential", "credentials", "sk", "ak"}


def secret_named(name) -> bool:
    """Whether a setting called ``name`` holds a secret by its name alone (its last word)."""
    if not isinstance(name, str) or not name:
        return False
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().replace("-", "_").split("_")
    if words[-1] == "key" and len(words) == 1:
        return False
    return name.lower() in _SECRET_NAMES or words[-1] in SECRET_WORDS


def has_userinfo(uri) -> bool:
    """``s3://user:pass@bucket``, ``https://token@host``: a URI that carries credentials (not
    Azure's ``wasbs://container@account...``, whose user info names the container)."""
    return isinstance(uri, str) and any(_credential_userinfo(m) for m in URI_USERINFO.finditer(uri))


def mask_text(text: str) -> str:
    """``text`` with every token-shaped word and every URI's user info as ``***`` (for errors and
    echoes of what the user gave)."""
    text = URI_USERINFO.sub(lambda m: m.group(1) + m.group(2) + (MASK if _credential_userinfo(m) else m.group(3)) + "@",
                            text)
    for shape, _ in TOKEN_SHAPES:
        text = shape.sub(MASK, text)
    return text


MASK = "***"


def shown_value(key: str, raw: str) -> str:
    """A ``--set`` value as an error may echo it: ``***`` under a secret's name (``...password=``),
    else with every token and every URI's user info masked."""
    return MASK if secret_named(key.rsplit(".", 1)[-1]) else mask_text(raw)
