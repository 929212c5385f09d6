"""Jobs that survive: ``spot``, ``max_runtime`` and ``storage.checkpoint``, shared by the providers.

Each provider renders the three neutral fields in its platform's own words (see the table in
docs/job-file.md#surviving-failures); what they share lives here: errors that point at the field,
the neutral field against a provider option that says the same thing, the URI schemes a platform
takes for checkpoints, and the host directory of a local or Docker job's checkpoints.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, Optional
from urllib.parse import unquote, urlparse

from ..spec.errors import CloudtrainWarning, JobFileError
from ..spec.job import JobSpec

CHECKPOINT_ENV = "CLOUDTRAIN_CHECKPOINT_DIR"
CHECKPOINT_LOC = ("storage", "checkpoint")


def field_error(job: JobSpec, loc: tuple, message: str) -> JobFileError:
    """A problem with the job's value at ``loc``: ``file:line: field: message`` (or the ``--set``)."""
    if job.source is not None:
        return job.source.error(message, loc)
    return JobFileError(message, field=".".join(str(p) for p in loc))


def spot_here_means_nothing(job: JobSpec, provider: str) -> None:
    """local and docker run on this machine: ``spot`` is a request for elsewhere; say so once."""
    if job.spot:
        warnings.warn(f"spot: {provider} runs the job on this machine, which has no spot capacity; "
                      "it runs as usual (spot applies on the cloud providers)", CloudtrainWarning)


def checkpoint_uri(job: JobSpec, platform: str, schemes: Iterable[str], example: str) -> Optional[str]:
    """``storage.checkpoint`` if its scheme is one ``platform`` mounts (``s3`` for ``s3://...``),
    else a ``JobFileError`` naming the schemes it takes."""
    uri = job.storage.checkpoint
    if uri is None:
        return None
    schemes = tuple(schemes)
    scheme = urlparse(uri).scheme
    if scheme not in schemes or not urlparse(uri).netloc and scheme != "file":
        taken = " or ".join(f"{s}://" for s in schemes)
        raise field_error(job, CHECKPOINT_LOC, f"{platform} keeps checkpoints under {taken}, got {uri!r}; "
                                               f"e.g. {example}")
    return uri


def host_checkpoint_dir(job: JobSpec, provider: str) -> Optional[Path]:
    """The directory on this machine that holds a local or Docker job's checkpoints: a path
    (relative to the job file, or to the current directory for ``--set``) or a ``file://`` URI."""
    uri = job.storage.checkpoint
    if uri is None:
        return None
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise field_error(job, CHECKPOINT_LOC, f"{uri!r} names another host; {provider} keeps checkpoints "
                                                   "on this machine: file:///abs/path or a path")
        return Path(unquote(parsed.path)).resolve()
    if parsed.scheme and len(parsed.scheme) > 1:  # not a Windows drive letter
        raise field_error(job, CHECKPOINT_LOC, f"{provider} keeps checkpoints in a directory on this machine, got "
                                               f"{uri!r}; give a path or a file:// URI "
                                               f"(e.g. --set storage.checkpoint=./checkpoints)")
    source = job.source
    if source is not None and source.path is not None and source.override_of(CHECKPOINT_LOC) is None:
        base = source.path.parent  # from the file
    else:
        base = Path.cwd()
    return (base / Path(uri).expanduser()).resolve()


def provider_setting(job: JobSpec, provider: str, options: Any, option: str, neutral_loc: tuple,
                     neutral: Any, written: Optional[str] = None) -> Any:
    """One setting said two ways: a neutral field (``neutral`` in the provider's terms, None when
    unset; ``written``: the field as the job wrote it) and ``providers.<provider>.<option>``.  The
    neutral value, unless only the option was set; both set to different values is an error."""
    from ..input.config import from_settings
    # a settings file's option is a default the job file's neutral field overrides
    explicit = option in getattr(options, "model_fields_set", ()) and not from_settings(job, provider, option)
    own = getattr(options, option)
    if neutral is None or neutral is False:
        return own
    if explicit and own != neutral:
        where = ".".join(neutral_loc)
        raise field_error(job, ("providers", provider, option),
                          f"{own} disagrees with {where}: {written or neutral}; keep one of them "
                          f"(the neutral {where} works on every provider)")
    return neutral


def with_neutral(job: JobSpec, provider: str, options: Any, settings: Dict[str, tuple]) -> Any:
    """``options`` with each ``{option: (neutral_loc, neutral_value[, as_written])}`` of
    ``settings`` taken from the neutral field (see ``provider_setting``): the rest of a provider
    reads its options alone, whichever way the job said it."""
    update = {option: provider_setting(job, provider, options, option, *setting)
              for option, setting in settings.items()}
    return options.model_copy(update=update)


def at_most(job: JobSpec, loc: tuple, value: Optional[int], limit: int, source: str) -> None:
    """A limit of the platform's on a neutral number of seconds (``source``: where it says so)."""
    if value is not None and value > limit:
        from ..spec.durations import format_duration
        raise field_error(job, loc, f"{format_duration(value)} is longer than the {format_duration(limit)} "
                                    f"{source}; lower it")
