"""``cloudtrain config``: a provider's merged settings and where each came from (``show``), the
user config's path (``path``), and writing settings (``set``)."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Tuple

from ..spec import yamlio
from ..input.config import (PROJECT_NAME, Layer, home, Settings, SettingsFile, find_project_file, known_provider,
                            leaves, merge, provider_hint, runs_setting_problem, user_config_path)
from ..spec.credentials import MASK, mask_text, masked, refusal, secret_named
from ..spec.errors import BadInput, JobFileError
from ..spec.job import Source
from ..spec.suggest import did_you_mean


def run(args) -> int:
    if args.action == "path":
        if args.items:
            raise BadInput("config path takes no arguments; it prints the user config's path")
        print(user_config_path())
        return 0
    if args.action == "set":
        return set_values(args)
    return show(args)


# -- show ---------------------------------------------------------------------------------------
def option_problems(settings: Settings) -> List[JobFileError]:
    """Every section of every settings file checked by its provider's ``Options`` (providers
    that are not installed are skipped: their plugin knows their options)."""
    from ..input.loading import model_problems
    from ..extend.plugins import get_provider_class, providers
    installed = providers()
    problems: List[JobFileError] = []
    for f in settings.files:
        for profile in (None, *f.profiles()):
            level = f.profiles().get(profile) if profile else f.data
            for name in ((level or {}).get("providers") or {}):
                found = f.section(name, profile)
                if not found or name not in installed:
                    continue
                data: Dict[str, Any] = {}
                texts, origins = merge(data, name, [Layer(f, *found)])
                source = Source(None, {}, {}, texts=texts, origins=origins)
                _, invalid = model_problems(get_provider_class(name).Options, data["providers"][name], source,
                                            ("providers", name))
                problems += invalid
    return problems


def show(args) -> int:
    from ..input.loading import load_job, model_problems, sorted_problems
    from ..spec.problems import JobFileProblems
    from ..extend.plugins import get_provider_class
    jobs = [i for i in args.items if "=" not in i]
    if len(jobs) != len(args.items) or len(jobs) > 1:
        raise BadInput("config show takes at most one job file (KEY=VALUE is for config set, or --set KEY=VALUE "
                       "with a job file)")
    if args.overrides and not jobs:
        raise BadInput("--set changes a job: give the job file too, e.g. cloudtrain config show job.yaml --set ...")
    job_path = jobs[0] if jobs else None
    settings = Settings.load(job_path, args.profile)
    provider, chosen_by = (args.provider, "-p") if args.provider else settings.default_provider_with_source()
    cls = get_provider_class(provider)
    problems = option_problems(settings)
    if job_path:
        job = load_job(job_path, args.overrides, provider=provider, settings=settings)
        section, source = job.providers.get(provider) or {}, job.source or Source(None, {}, {})
    else:
        data: Dict[str, Any] = {}
        texts, origins = merge(data, provider, settings.layers(provider))
        section = (data.get("providers") or {}).get(provider) or {}
        source = Source(None, {}, {}, texts=texts, origins=origins)
    options, invalid = model_problems(cls.Options, section, source, ("providers", provider))
    JobFileProblems.raise_all(sorted_problems(problems + [p for p in invalid if str(p) not in map(str, problems)]))
    rows = []
    for key, field in _fields(cls.Options):
        value = getattr(options, field)
        if hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
        elif isinstance(value, list) and value and hasattr(value[0], "model_dump"):
            value = [v.model_dump(mode="json") for v in value]
        secret = bool((cls.Options.model_fields[field].json_schema_extra or {}).get("secret")) \
            if isinstance(cls.Options.model_fields[field].json_schema_extra, dict) else False
        rows.append({"option": key, "value": _mask(value, secret or secret_named(key)),
                     "source": _origin(key, section, source, provider, cls)})
    files = [{"path": str(f.path), "kind": f.kind} for f in settings.files]
    if args.output == "json":
        print(json.dumps({"provider": provider, "provider_from": chosen_by, "profile": settings.profile,
                          "profiles": sorted({n for f in settings.files for n in f.profiles()}),
                          "files": files, "settings": rows}, indent=2, default=str))
        return 0
    print(f"provider: {provider} (from {chosen_by})")
    names = sorted({n for f in settings.files for n in f.profiles()})
    if settings.profile or names:
        print(f"profile: {settings.profile or '-'}" + (f" (profiles: {', '.join(names)})" if names else ""))
    print("settings files: " + (", ".join(f"{f['path']} ({f['kind']})" for f in files) or
                                f"none (the user config would be {user_config_path()})"))
    table = [("OPTION", "VALUE", "FROM")] + [(r["option"], _text(r["value"]), r["source"]) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(2)]
    for r in table:
        print(f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}".rstrip())
    return 0


def _fields(model) -> List[Tuple[str, str]]:
    return [((f.alias or name), name) for name, f in model.model_fields.items()]


def _origin(key: str, section: dict, source: Source, provider: str, cls) -> str:
    loc = ("providers", provider, key)
    if key not in section:
        return "not set: needed to submit" if key in cls.required else "default"
    keys = source.overrides_of(loc)
    if keys:
        return " ".join(f"--set {key}={_text(_mask(source.overrides[key], secret_named(key.split('.')[-1])))}"
                        for key in keys)
    where = source.locate(loc)
    if where["line"]:
        return f"{where['file']}:{where['line']}"
    return where["file"] or "default"


def _mask(value, secret: bool):
    """``value`` for display: ``***`` when its setting is secret (by the option's schema or by its
    name: ``client_secret``, ``api_key``...), and inside it every value under a secret name or of
    a credential's shape."""
    if secret and value not in (None, "", [], {}):
        return MASK
    if isinstance(value, dict):
        return {k: _mask(v, secret_named(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, False) for v in value]
    shown = masked(value)
    return mask_text(shown) if isinstance(shown, str) else shown


def _text(value) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)


# -- set ----------------------------------------------------------------------------------------
def set_values(args) -> int:
    from ..input.loading import model_problems, parse_override
    from ..extend.plugins import get_provider_class
    if not args.items:
        raise BadInput("config set needs KEY=VALUE, e.g. cloudtrain config set -p sagemaker region=us-east-1")
    path = _target(args.project)
    current = SettingsFile.read(path, "project file" if args.project else "user config")
    data = current.data if current is not None else {}
    at: Tuple[str, ...] = ("profiles", args.profile) if args.profile else ()
    level = _level(data, at)
    changed = []
    for item in args.items:
        o = parse_override(item)
        given = f"config set {o.key}={MASK if secret_named(o.path[-1]) else mask_text(o.raw)}"
        for loc, value in leaves(o.value, o.path):
            refused = refusal(value, loc[-1] if loc else None)
            if refused:
                raise BadInput(f"{given.split('=')[0]}: {refused}; nothing was written")
        if o.key == "provider":
            if not isinstance(o.value, str) or not known_provider(o.value):
                raise BadInput(f"{given}: unknown provider{provider_hint(str(o.value))}")
            level["provider"] = o.value
            changed.append(".".join(at + ("provider",)))
            continue
        if o.key == "providers":  # a profile's failover order: providers=a,b or providers=[a, b]
            level["providers"] = _failover_order(o.value, given, level, args.profile)
            changed.append(".".join(at + ("providers",)))
            continue
        if o.path[0] == "runs":  # the retention of local runs (cloudtrain.input.config.Retention)
            problem = runs_setting_problem(o.path, o.value, args.profile, args.project)
            if problem:
                raise BadInput(f"{given}: {problem}; nothing was written")
            runs = data.get("runs")
            data["runs"] = dict(runs if isinstance(runs, dict) else {}, **{o.path[1]: o.value})
            changed.append(o.key)
            continue
        if not args.provider:
            raise BadInput(f"{given}: name the provider whose option this is, e.g. cloudtrain config set -p "
                           f"sagemaker {given[len('config set '):]} (or provider=NAME sets the default provider)")
        cls = get_provider_class(args.provider)
        names = [k for k, _ in _fields(cls.Options)]
        if o.path[0] not in names:
            hint = did_you_mean(o.path[0], names) or f"; {args.provider}'s options are: {', '.join(names)}"
            raise BadInput(f"{given}: {args.provider} has no option {o.path[0]!r}{hint}")
        sections = level.setdefault("providers", {})
        if isinstance(sections, list):
            order = ", ".join(map(str, sections))
            raise BadInput(f"{given}: profile {args.profile!r} is a failover order (providers: {order}); its "
                           f"providers' options are the top level's: cloudtrain config set -p {args.provider} "
                           f"{given[len('config set '):]} (without --profile); nothing was written")
        section = dict(sections.get(args.provider) or {})
        target = section
        for part in o.path[:-1]:
            if not isinstance(target.get(part), dict):
                target[part] = {}
            target = target[part]
        target[o.path[-1]] = o.value
        _, invalid = model_problems(cls.Options, section, None)
        mine = [p for p in invalid if p.field and p.field.split(".")[0] == o.path[0]]
        if mine:
            raise BadInput(f"{given}: {mask_text(mine[0].detail)}; nothing was written")
        from ..input.settingscheck import option_problems
        for detail in option_problems(args.provider, section, o.path[0])[:1]:  # what validate would refuse later
            raise BadInput(f"{given}: {mask_text(detail)}; nothing was written")
        sections[args.provider] = section
        changed.append(".".join(at + ("providers", args.provider, o.key)))
    _write(path, data)
    for name in changed:
        print(f"{path}: {name} set")
    return 0


def _failover_order(value: Any, given: str, level: dict, profile) -> List[str]:
    """The provider names of ``config set --profile NAME providers=a,b`` (a profile's failover
    order, docs/configuration.md), checked as the settings file's own check does."""
    if not profile:
        raise BadInput(f"{given}: a failover order belongs to a profile: cloudtrain config set --profile NAME "
                       f"{given[len('config set '):]}; nothing was written")
    names = value if isinstance(value, list) else [n.strip() for n in str(value or "").split(",") if n.strip()]
    if not names:
        raise BadInput(f"{given}: name the providers in order, e.g. providers=sagemaker,azure; nothing was written")
    for name in names:
        if not isinstance(name, str) or not known_provider(name):
            raise BadInput(f"{given}: unknown provider {name!r}{provider_hint(str(name))}; nothing was written")
    current = level.get("providers")
    if isinstance(current, dict) and current:
        raise BadInput(f"{given}: profile {profile!r} has provider options ({', '.join(map(str, current))}); a "
                       "failover profile's providers take the top level's options: move them there first; "
                       "nothing was written")
    return names


def _target(project: bool) -> Path:
    if not project:
        return user_config_path()
    return find_project_file(Path.cwd()) or Path.cwd() / PROJECT_NAME


def _level(data: dict, at: tuple) -> dict:
    level = data
    for part in at:
        nxt = level.get(part)
        if not isinstance(nxt, dict):
            nxt = level[part] = {}
        level = nxt
    return level


def _write(path: Path, data: dict) -> None:
    """The settings as YAML, written whole (comments are not kept), readable by the owner only."""
    from ..input.homedir import make_home
    if path.parent == home():
        make_home()
    else:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".config-", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(yamlio.dump(data))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
