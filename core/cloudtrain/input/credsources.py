"""Where a platform's SDK would find credentials, looked at offline (``cloudtrain doctor``, a
provider class's ``credential_check``): whether environment variables are set, whether a file
is there, whether an INI file has a section.  Names and files only: no value is returned, and a
file is read only for its section names.  Which variables and files a platform's SDK reads is
the platform's fact, in its plugin; what every plugin does with them lives here, once.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional


def env_set(*names: str) -> bool:
    """Whether every one of ``names`` is set (and not empty) in the environment."""
    return all(os.environ.get(n) for n in names)


def file_at(path: str) -> Optional[Path]:
    """``path`` (``~`` expanded) when it is a regular file there, else None."""
    p = Path(os.path.expanduser(path))
    return p if p.is_file() else None


def ini_has_section(path: Optional[Path], names: Iterable[str]) -> bool:
    """Whether the INI file ``path`` has one of the sections ``names`` (an unreadable file has none)."""
    if path is None:
        return False
    import configparser
    parser = configparser.ConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return False
    return any(parser.has_section(n) for n in names)
