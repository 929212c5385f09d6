"""``cloudtrain doctor [-p P] [--online]``: for each installed provider (or ``-p``'s), whether its
SDK is there, where its credentials would come from and whether they are there, and whether the
settings a submit needs are complete.

Offline by default: credentials are looked for where each platform's SDK looks (environment
variables, the SDK's files), never read into output, never sent.  ``--online`` makes one harmless
read call per provider (it lists the jobs, as ``cloudtrain list -p P`` does).  Exit codes: 0, or
with ``-p`` 1 when that provider is not ready; 3 when ``--online``'s call failed.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from ..spec.errors import CloudtrainError
from ..launch.exitcodes import EXIT_JOB_FAILED, EXIT_OK, EXIT_PLATFORM

OK, MISSING, UNKNOWN, FAILED = "ok", "missing", "not checked offline", "failed"


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="per provider: SDK, where credentials come from, settings complete (offline)")
    p.add_argument("-p", "--provider", help="only this provider (default: every installed one)")
    p.add_argument("--profile", metavar="NAME",
                   help="settings profile of the config files (default: $CLOUDTRAIN_PROFILE)")
    p.add_argument("--online", action="store_true", help="also make one harmless read call (list the jobs)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")


@dataclass
class Check:
    status: str          # ok | missing | not checked offline | failed
    detail: str


@dataclass
class Report:
    provider: str
    plugin: str
    sdk: Check
    credentials: Check
    settings: Check
    online: Optional[Check] = None
    fixes: List[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        checks = [self.sdk, self.credentials, self.settings] + ([self.online] if self.online else [])
        return all(c.status in (OK, UNKNOWN) for c in checks)


# -- credentials: where each platform's SDK looks (offline: names and files, never values) ---------
def _env(*names: str) -> bool:
    return all(os.environ.get(n) for n in names)


def _file(path: str) -> Optional[Path]:
    p = Path(os.path.expanduser(path))
    return p if p.is_file() else None


def _ini_has_section(path: Optional[Path], names: Tuple[str, ...]) -> bool:
    if path is None:
        return False
    import configparser
    parser = configparser.ConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return False
    return any(parser.has_section(n) for n in names)


def aws_credentials() -> Check:
    looked = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials, ~/.aws/config, " \
             "AWS_WEB_IDENTITY_TOKEN_FILE, container/instance metadata"
    if _env("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        return Check(OK, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
    profile = os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "default"
    creds = _file(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials")
    config = _file(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config")
    if _ini_has_section(creds, (profile,)):
        return Check(OK, f"profile {profile!r} in {creds}")
    if _ini_has_section(config, (profile, f"profile {profile}")):
        return Check(OK, f"profile {profile!r} in {config} (sso, role or process credentials: --online checks them)")
    if _env("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        return Check(OK, "a web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN)")
    if os.environ.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") or os.environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return Check(OK, "the container's credentials endpoint (AWS_CONTAINER_CREDENTIALS_*)")
    if os.environ.get("AWS_PROFILE"):
        return Check(MISSING, f"AWS_PROFILE={profile}: no such profile in {creds or '~/.aws/credentials'} or "
                              f"{config or '~/.aws/config'}; fix AWS_PROFILE, "
                              f"or run `aws configure --profile {profile}`")
    return Check(MISSING, f"none found (looked in: {looked}; an EC2 instance role is not checked offline); "
                          "run `aws configure` or `aws sso login`, or set AWS_PROFILE")


def azure_credentials() -> Check:
    if _env("AZURE_CLIENT_ID", "AZURE_TENANT_ID") and (os.environ.get("AZURE_CLIENT_SECRET")
                                                        or os.environ.get("AZURE_CLIENT_CERTIFICATE_PATH")):
        return Check(OK, "a service principal in the environment (AZURE_CLIENT_ID, AZURE_TENANT_ID, its secret)")
    config_dir = Path(os.path.expanduser(os.environ.get("AZURE_CONFIG_DIR") or "~/.azure"))
    if (config_dir / "msal_token_cache.json").is_file() or (config_dir / "msal_token_cache.bin").is_file():
        return Check(OK, f"`az login` ({config_dir})")
    if os.environ.get("IDENTITY_ENDPOINT") or os.environ.get("MSI_ENDPOINT"):
        return Check(OK, "a managed identity (IDENTITY_ENDPOINT)")
    return Check(MISSING, f"none found (looked in: AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, "
                          f"`az login` in {config_dir}, a managed identity); run `az login`")


def tencent_credentials() -> Check:
    if _env("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY"):
        return Check(OK, "TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY in the environment")
    for path in ("~/.tencentcloud/credentials", "/etc/tencentcloud/credentials"):
        if _file(path):
            return Check(OK, f"{os.path.expanduser(path)}")
    if os.environ.get("TKE_ROLE_ARN") or os.environ.get("TKE_WEB_IDENTITY_TOKEN_FILE"):
        return Check(OK, "the TKE OIDC role (TKE_* variables)")
    return Check(MISSING, "none found (looked in: TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY, "
                          "~/.tencentcloud/credentials, /etc/tencentcloud/credentials, TKE_* variables; a CVM role is "
                          "not checked offline); export TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY")


def huawei_credentials() -> Check:
    if _env("HUAWEICLOUD_SDK_AK", "HUAWEICLOUD_SDK_SK"):
        return Check(OK, "HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK in the environment")
    path = os.environ.get("HUAWEICLOUD_SDK_CREDENTIALS_FILE") or "~/.huaweicloud/credentials"
    if _file(path):
        return Check(OK, os.path.expanduser(path))
    return Check(MISSING, f"none found (looked in: HUAWEICLOUD_SDK_AK/HUAWEICLOUD_SDK_SK, {path}); "
                          "export HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK")


SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def kube_credentials(kubeconfig: Optional[str] = None) -> Check:
    if kubeconfig:
        return Check(OK if _file(kubeconfig) else MISSING, f"the kubeconfig option: {kubeconfig}"
                     + ("" if _file(kubeconfig) else ": no such file"))
    named = os.environ.get("KUBECONFIG")
    files = [p for p in (named or "~/.kube/config").split(os.pathsep) if p]
    found = [str(_file(p)) for p in files if _file(p)]
    if found:
        return Check(OK, ("KUBECONFIG: " if named else "") + ", ".join(found))
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.isfile(SERVICE_ACCOUNT_TOKEN):
        return Check(OK, "the in-cluster service account")
    where = f"KUBECONFIG={named}" if named else "~/.kube/config (KUBECONFIG is not set)"
    return Check(MISSING, f"none found (looked in: {where}, the in-cluster service account); export KUBECONFIG")


def docker_engine() -> Check:
    host = os.environ.get("DOCKER_HOST")
    if host:
        return Check(OK, f"DOCKER_HOST={host} (no credentials: the engine's socket)")
    sock = "/var/run/docker.sock"
    return Check(OK, sock) if os.path.exists(sock) else \
        Check(MISSING, f"no Docker engine socket ({sock}, DOCKER_HOST not set); start Docker")


CREDENTIALS: Dict[str, Callable[..., Check]] = {
    "sagemaker": aws_credentials, "ec2": aws_credentials, "eks": aws_credentials,
    "azure": azure_credentials, "tione": tencent_credentials, "modelarts": huawei_credentials,
    "kubeflow": kube_credentials, "kubeflow-trainer": kube_credentials, "volcano": kube_credentials,
    "docker": lambda: docker_engine(), "local": lambda: Check(OK, "none needed: this machine"),
}


def credentials_check(name: str, cls, options) -> Check:
    """A plugin may say itself (a ``credential_check()`` classmethod returning ``(ok, detail)``)."""
    own = getattr(cls, "credential_check", None)
    if callable(own):
        ok, detail = own()
        return Check(OK if ok else MISSING, detail)
    if name == "modelarts-lite":  # a kubeconfig given, else one fetched from CCE with the Huawei keys
        kubeconfig = getattr(options, "kubeconfig", None)
        return kube_credentials(kubeconfig) if kubeconfig else huawei_credentials()
    if name in ("kubeflow", "kubeflow-trainer", "volcano"):
        return kube_credentials(getattr(options, "kubeconfig", None))
    found = CREDENTIALS.get(name)
    return found() if found else Check(UNKNOWN, "the plugin does not say where its credentials come from; see its docs")


# -- settings --------------------------------------------------------------------------------
def settings_check(provider, settings) -> Tuple[Check, Optional[object], List[str]]:
    """Whether the merged settings give every option ``provider`` needs to submit."""
    from ..input.loading import job_from_dict
    try:
        job = job_from_dict({"name": "doctor", "command": "true", "code": None}, provider=provider.name,
                            settings=settings)
        options = provider.options(job)
    except CloudtrainError as exc:
        return Check(MISSING, f"the settings are invalid: {str(exc).splitlines()[0]}"), None, []
    missing, fixes = [], []
    for option, example in provider.required.items():
        if getattr(options, option, None) not in (None, ""):
            continue
        try:
            if provider.fallback(option, job, options):
                continue
        except Exception:  # an SDK's own complaint (a profile it cannot find): the option is not set either way
            pass
        missing.append(option)
        fixes.append(f"cloudtrain config set -p {provider.name} {option}={example}")
    if missing:
        names = ", ".join(f"providers.{provider.name}.{o}" for o in missing)
        return Check(MISSING, "not set: " + names), options, fixes
    return Check(OK, "complete" if provider.required else "none needed"), options, fixes


def check(name: str, settings, online: bool = False) -> Report:
    from ..extend.plugins import get_provider, providers
    info = providers()[name]
    cls = info.cls
    missing_sdk = info.sdk_missing()
    sdk = Check(MISSING, f"missing {', '.join(missing_sdk)}: {cls.install_hint()}") if missing_sdk else \
        Check(OK, ", ".join(cls.sdk_modules) if cls.sdk_modules else "none needed")
    provider = get_provider(name)
    configured, options, fixes = settings_check(provider, settings)
    report = Report(name, info.plugin, sdk, credentials_check(name, cls, options), configured, fixes=fixes)
    if missing_sdk:
        report.fixes.insert(0, cls.install_hint())
    if online:
        # the call reads the merged settings every command reads (api.account_settings: the user
        # config, the project file and the profile), so a configured region is used (issue 44, item 4)
        provider.account = {k: v for layer in settings.layers(name) for k, v in layer.options.items()}
        report.online = online_check(provider) if not missing_sdk else Check(MISSING, "no SDK to call with")
    return report


def online_check(provider) -> Check:
    """One harmless read call: the provider's job list (what ``cloudtrain list -p`` shows), or the
    provider's own ``online_check()`` (a line saying what it found) where it has one."""
    own = getattr(provider, "online_check", None)
    try:
        if callable(own):
            return Check(OK, own())
        jobs = provider.list()
    except CloudtrainError as exc:
        from ..spec.credentials import mask_text
        return Check(FAILED, mask_text(str(exc).splitlines()[0]))
    return Check(OK, f"listed {len(jobs)} job{'s' if len(jobs) != 1 else ''}")


def run(args) -> int:
    from ..input.config import Settings, provider_hint
    from ..spec.errors import BadInput
    from ..extend.plugins import providers
    settings = Settings.load(None, args.profile)
    installed = providers()
    if args.provider and args.provider not in installed:
        raise BadInput(f"unknown provider {args.provider!r}{provider_hint(args.provider)}")
    names = [args.provider] if args.provider else sorted(installed)
    reports = [check(n, settings, args.online) for n in names]
    if args.output == "json":
        print(json.dumps([dict(asdict(r), ready=r.ready) for r in reports], indent=2))
    else:
        from . import colour
        for r in reports:
            ready = colour.ok("ready") if r.ready else colour.bad("not ready")
            print(colour.bold(f"{r.provider}") + f" ({r.plugin}): " + ready)
            rows = [("sdk", r.sdk), ("credentials", r.credentials), ("settings", r.settings)]
            if r.online:
                rows.append(("online", r.online))
            for label, c in rows:
                mark = (colour.ok(c.status) if c.status == OK
                        else colour.bad(c.status) if c.status in (MISSING, FAILED)
                        else colour.dim(c.status))
                print(f"  {label:<12} {mark}: {c.detail}")
            for fix in r.fixes:
                print(f"  fix:         {fix}")
    if any(r.online and r.online.status == FAILED for r in reports):
        return EXIT_PLATFORM
    return EXIT_OK if all(r.ready for r in reports) or not args.provider else EXIT_JOB_FAILED
