"""Which registries each managed platform pulls a job's image from, and the warning ``validate``
(and ``render``, ``submit``) gives for an image it will not pull: a Docker Hub image on SageMaker,
TI-ONE or ModelArts is the usual case.  A platform's own image goes in ``providers.<name>.image``
(in the job file, the user config or a profile), which that provider uses instead of ``image``.

What each platform documents:

- SageMaker training pulls from Amazon ECR, or from a private Docker registry reachable from the
  job's VPC (``TrainingImageConfig``): https://docs.aws.amazon.com/sagemaker/latest/dg/docker-containers-adapt-your-own-private-registry.html
- TI-ONE takes TCR (enterprise) and CCR (personal) images, and others as a third-party
  ``CUSTOM`` image pulled over the internet (``ImageInfo``): https://cloud.tencent.com/document/api/851/75051#ImageInfo
- ModelArts Standard runs custom images "only after they are uploaded to SWR":
  https://support.huaweicloud.com/intl/en-us/drawer-modelarts/ma_drawer_004.html
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


PLATFORMS = {
    "sagemaker": Pulls("Amazon ECR (or a private registry in the job's VPC)",
                       (r"\d+\.dkr\.ecr(-fips)?\.[a-z0-9-]+\.amazonaws\.com(\.cn)?", r"public\.ecr\.aws"),
                       "push it to ECR "
                       "(docker tag + docker push <account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>)",
                       "https://docs.aws.amazon.com/sagemaker/latest/dg/docker-containers-adapt-your-own-private-registry.html"),
    "tione": Pulls("Tencent Cloud's registries, TCR and CCR (others as a CUSTOM image, pulled over the internet)",
                   (r"[a-z0-9-]+\.tencentcloudcr\.com", r"ccr\.ccs\.tencentyun\.com"),
                   "push it to CCR (ccr.ccs.tencentyun.com/<namespace>/<image>:<tag>) or TCR",
                   "https://cloud.tencent.com/document/api/851/75051#ImageInfo"),
    "modelarts": Pulls("Huawei Cloud SWR",
                       (r"swr\.[a-z0-9-]+\.myhuaweicloud\.(com|eu)", r"swr\.[a-z0-9-]+\.[a-z0-9.-]+"),
                       "push it to SWR (swr.<region>.myhuaweicloud.com/<organization>/<image>:<tag>)",
                       "https://support.huaweicloud.com/intl/en-us/drawer-modelarts/ma_drawer_004.html"),
}


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


def unpullable(provider: str, image: Optional[str]) -> Optional[str]:
    """Why ``provider``'s platform will not pull ``image`` (a warning), or None.  Only a Docker Hub
    image is named: another registry may be one the platform reaches (SageMaker's private registry
    in a VPC, TI-ONE's CUSTOM images), which only the platform can tell."""
    pulls = PLATFORMS.get(provider)
    if pulls is None or not image or not is_docker_hub(image) or pulls.pulls(registry_host(image)):
        return None
    return (f"{image} is on Docker Hub, but {provider} pulls images from {pulls.what} ({pulls.doc}); {pulls.fix}, "
            f"and give it as providers.{provider}.image (in the job file, the user config or a profile) to keep "
            f"`image` for the other providers")
