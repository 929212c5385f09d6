"""Errors that the CLI turns into one clear line and an exit code.

Every message ends with the fix, so a user knows what to do next.
Only genuine bugs (anything else) show a traceback.
"""
from __future__ import annotations

from ..launch.exitcodes import (EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_JOB_FAILED,  # noqa: F401
                        EXIT_OK, EXIT_PLATFORM)


class CloudtrainError(Exception):
    """Base class: an expected failure with a user-facing message."""

    exit_code = EXIT_BAD_INPUT


class BadInput(CloudtrainError):
    """The job file, its options or the command line are wrong; nothing was started or sent."""

    exit_code = EXIT_BAD_INPUT


class JobFileError(BadInput):
    """A job file problem located at ``file:line: field: message``."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None):
        from .credentials import mask_text  # a value it echoes: no token, no URI's user info
        message, file = mask_text(message), None if file is None else mask_text(file)
        self.file, self.line, self.field, self.detail = file, line, field, message
        where = ""
        if file:
            where = f"{file}:{line}: " if line else f"{file}: "
        super().__init__(f"{where}{field + ': ' if field else ''}{message}")

    @classmethod
    def at(cls, job, loc, message: str) -> "JobFileError":
        """The error about field ``loc`` (a tuple of keys, e.g. ``("providers", "azure",
        "compute")``) of ``job``, as ``Source.error`` words every job-file error: the ``--set``
        that gave the value, else the file and the line of the field (or of the nearest
        enclosing key the file has, the document's first line for an absent top-level field)."""
        source = getattr(job, "source", None)
        if source is None:
            return cls(message, field=".".join(str(part) for part in loc))
        return source.error(message, tuple(loc))


class MissingExtra(BadInput):
    """A provider's SDK is not installed."""

    def __init__(self, provider: str, install_hint: str, module: str):
        super().__init__(
            f"provider {provider!r} needs the {module!r} package, which is not installed; "
            f"install it with: {install_hint}")


class UnknownProvider(BadInput):
    pass


class PlatformError(CloudtrainError):
    """The platform refused the request or could not be reached (auth, quota, API error)."""

    exit_code = EXIT_PLATFORM

    def __init__(self, message: str, *, request_id: str | None = None):
        self.request_id = request_id
        super().__init__(message + (f" (request id {request_id})" if request_id else ""))


class MissingCredentials(PlatformError):
    """The platform's SDK found no credentials at all (nothing was sent).  One shape on every
    provider: ``no <platform> credentials found (looked in: <where>); <fix>``."""

    def __init__(self, platform: str, looked_in: str, fix: str):
        self.platform, self.looked_in, self.fix = platform, looked_in, fix
        super().__init__(f"no {platform} credentials found (looked in: {looked_in}); {fix}")


class JobNotFound(BadInput):
    pass


class CloudtrainWarning(UserWarning):
    """Something that works but probably not as meant (e.g. a platform feature the job's shape
    skips).  Raised with ``warnings.warn``; the CLI prints ``cloudtrain: warning: ...``."""


class DiskFull(PlatformError):
    """No space is left where cloudtrain writes (the state store, a run directory, its logs).
    ``where``: the directory, named in one line: ``disk full under <where>``."""

    def __init__(self, where):
        self.where = str(where)
        super().__init__(f"disk full under {self.where}; free space there (or set CLOUDTRAIN_HOME to a "
                         "directory on another disk) and run the command again")

    @property
    def reason(self) -> str:
        """How a job that met it ends: ``disk full under <where>``."""
        return f"disk full under {self.where}"
