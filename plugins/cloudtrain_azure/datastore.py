"""``azureml://datastores/NAME/paths/PATH`` as an object store: the blobs of an Azure ML blob
datastore, reached the way the SDK reaches them for ``jobs.download`` and artifact uploads.

The datastore is resolved by ``get_datastore_info`` (azure/ai/ml/_artifacts/_artifact_utilities.py:
ARM ``datastores/NAME`` for its account and container, then ``listSecrets`` for an expiring SAS
token, or the MLClient's own credential for an identity-based datastore), and the blobs are
listed, read and written with azure-storage-blob's ``ContainerClient``.  Used by the controller to
carry a checkpoint to or from Azure ML (``AzureProvider.checkpoint_store``); it needs the
workspace's ``MLClient``, so it is opened through the azure provider, never from a bare URL.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

from cloudtrain.spec.errors import BadInput
from cloudtrain.transfer.objectstore import ObjectStore, ObjectUrl, Progress

from . import sdk

# Blocks of 4 MiB above 4 MiB (azure-storage-blob's ``max_single_put_size``/``max_block_size``,
# default 64 MiB for one PUT read whole): memory stays bounded whatever the checkpoint's size.
BLOCK = 4 << 20


def split(url: ObjectUrl) -> Tuple[str, str]:
    """``azureml://datastores/NAME/paths/PATH`` -> ``(NAME, PATH)``; bad input for another form."""
    name, sep, path = url.key.partition("/paths/")
    if url.bucket != "datastores" or not sep or not name or "/" in name:
        if url.bucket == "datastores" and name and not sep and url.key == name:
            return name, ""
        raise BadInput(f"{url} is not an azureml://datastores/NAME/paths/PATH URI; give the datastore path that way")
    return name, path


class AzureMLDatastoreStore(ObjectStore):
    scheme = "azureml"
    sdk_modules = ("azure.ai.ml", "azure.storage.blob")

    def __init__(self, ml_client: Any = None, **_settings):
        if ml_client is None:
            raise BadInput("azureml:// datastores are reached through a workspace: the azure provider opens them "
                           "(its subscription_id, resource_group and workspace)")
        self.ml = ml_client
        self._containers: Dict[str, Any] = {}

    @property
    def where(self) -> str:
        return f"{getattr(self.ml, 'subscription_id', '')}/{getattr(self.ml, 'resource_group_name', '')}/" \
               f"{getattr(self.ml, 'workspace_name', '')}"

    def container(self, datastore: str):
        if datastore not in self._containers:
            from azure.ai.ml._artifacts._artifact_utilities import get_datastore_info
            from azure.storage.blob import ContainerClient
            with sdk.azure_errors(f"reading the datastore {datastore}"):
                info = get_datastore_info(self.ml.datastores, datastore)
            self._containers[datastore] = ContainerClient(
                account_url=info["account_url"], container_name=info["container_name"], credential=info["credential"],
                max_single_put_size=BLOCK, max_block_size=BLOCK, max_chunk_get_size=BLOCK,
                max_single_get_size=BLOCK)
        return self._containers[datastore]

    def exists(self, url: ObjectUrl) -> bool:
        name, path = split(url)
        with sdk.azure_errors(f"looking for {url}"):
            return bool(self.container(name).get_blob_client(path).exists())

    def put(self, url: ObjectUrl, data: bytes, content_type: str = "application/octet-stream") -> None:
        from azure.storage.blob import ContentSettings
        name, path = split(url)
        with sdk.azure_errors(f"uploading {url}"):
            self.container(name).upload_blob(path, data, overwrite=True,
                                             content_settings=ContentSettings(content_type=content_type))

    def put_file(self, url: ObjectUrl, path: Path, content_type: str = "application/octet-stream") -> None:
        """From the file, in blocks of ``BLOCK`` above one block (one in flight)."""
        from azure.storage.blob import ContentSettings
        name, blob = split(url)
        with open(path, "rb") as fh, sdk.azure_errors(f"uploading {url}"):
            self.container(name).upload_blob(blob, fh, length=Path(path).stat().st_size, overwrite=True,
                                             max_concurrency=1,
                                             content_settings=ContentSettings(content_type=content_type))

    def objects(self, url: ObjectUrl) -> Iterator[Tuple[ObjectUrl, int]]:
        name, path = split(url)
        with sdk.azure_errors(f"listing {url}"):
            for blob in self.container(name).list_blobs(name_starts_with=path or None):
                yield ObjectUrl("azureml", "datastores", f"{name}/paths/{blob.name}"), int(blob.size)

    def fetch(self, url: ObjectUrl, dest: Path, progress: Optional[Progress] = None) -> None:
        """Into ``dest`` chunk by chunk (``BLOCK`` at a time)."""
        name, path = split(url)
        with open(dest, "wb") as fh, sdk.azure_errors(f"downloading {url}"):
            for chunk in self.container(name).download_blob(path, max_concurrency=1).chunks():
                fh.write(chunk)
                if progress is not None:
                    progress(len(chunk))
