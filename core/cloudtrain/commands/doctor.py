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
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Tuple

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
def credentials_check(cls, options) -> Check:
    """The provider class says where its credentials come from (``credential_check(options)``:
    ``(found, detail)``, or None when it does not say)."""
    found = cls.credential_check(options)
    if found is None:
        return Check(UNKNOWN, "the plugin does not say where its credentials come from; see its docs")
    ok, detail = found
    return Check(OK if ok else MISSING, detail)


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
    report = Report(name, info.plugin, sdk, credentials_check(cls, options), configured, fixes=fixes)
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
