"""The registries a managed platform pulls a job's image from, and the warning ``validate`` (and
``render``, ``submit``) gives for an image it will not pull: a Docker Hub image on a platform that
pulls only from its own registry is the usual case.  A platform's own image goes in
``providers.<name>.image`` (in the job file, the user config or a profile), which that provider
uses instead of ``image``.

Which registries a platform pulls from is the platform's fact: its provider class says it, as
``image_registries = Pulls(...)`` with the platform's documentation next to it (docs/plugins.md,
"The provider class"); a provider without one pulls from anywhere, Docker Hub included.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

DOCKER_HUB_HOSTS = ("docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com")


@dataclass(frozen=True)
class Pulls:
    """What a platform pulls: ``what`` in words, the registry hosts it pulls (patterns), the fix and the doc."""

    what: str
    hosts: Tuple[str, ...]
    fix: str
    doc: str

    def pulls(self, host: Optional[str]) -> bool:
        return host is not None and any(re.fullmatch(p, host) for p in self.hosts)


def registry_host(image: str) -> Optional[str]:
    """The registry host of an image reference; None for Docker Hub's short form (``pytorch/pytorch``,
    ``python:3.11``): Docker takes the first component as a host only when it has a '.' or ':' or is
    ``localhost``."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first.lower()
    return None


def is_docker_hub(image: str) -> bool:
    host = registry_host(image)
    return host is None or host in DOCKER_HUB_HOSTS


def unpullable(provider: str, pulls: Optional[Pulls], image: Optional[str]) -> Optional[str]:
    """Why ``provider``'s platform, which pulls what ``pulls`` says (its class's ``image_registries``),
    will not pull ``image`` (a warning), or None.  Only a Docker Hub image is named: another
    registry may be one the platform reaches (a private registry in the job's network, a
    third-party image pulled over the internet), which only the platform can tell."""
    if pulls is None or not image or not is_docker_hub(image) or pulls.pulls(registry_host(image)):
        return None
    return (f"{image} is on Docker Hub, but {provider} pulls images from {pulls.what} ({pulls.doc}); {pulls.fix}, "
            f"and give it as providers.{provider}.image (in the job file, the user config or a profile) to keep "
            f"`image` for the other providers")
