"""What ``validate`` would say about one provider option, asked when the option is written
(``cloudtrain config set``), so that a value validate refuses later is refused at once."""
from __future__ import annotations

from typing import List, Optional

from ..spec.errors import BadInput

# a job that asks nothing of a provider: only the option's own checks can fail on it
_PROBE = {"name": "config-check", "command": "true", "code": None}


def option_problems(provider: str, section: dict, option: str) -> List[str]:
    """The problems ``validate`` (every check a submit makes first, offline) finds at
    ``providers.<provider>.<option>`` with the settings ``section``; [] when none."""
    import warnings
    from .loading import job_from_dict
    from ..extend.plugins import get_provider
    where = f"providers.{provider}.{option}"
    try:
        job = job_from_dict(dict(_PROBE, providers={provider: section}))
    except BadInput as exc:
        return [_detail(p) for p in _each(exc) if _at(p, where)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            get_provider(provider).validate(job, submit=True)
    except BadInput as exc:
        return [_detail(p) for p in _each(exc) if _at(p, where)]
    return []


def _each(exc: BadInput):
    return getattr(exc, "problems", None) or [exc]


def _at(problem, where: str) -> bool:
    field: Optional[str] = getattr(problem, "field", None)
    return bool(field) and (field == where or str(field).startswith(where + "."))


def _detail(problem) -> str:
    return getattr(problem, "detail", None) or str(problem)
