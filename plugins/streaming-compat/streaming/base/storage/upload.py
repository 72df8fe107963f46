"""``streaming.base.storage.upload``: the reference's uploaders as facades over streaming-core's storage.

``CloudUploader.get(out, keep_local, progress_bar, retry, exist_ok)`` returns the provider class for ``out``'s remote
scheme. Uploads go through :func:`streaming_core.storage.facade.upload_file`, which retries and then confirms the object
exists; ``retry`` counts retries after the first attempt, as everywhere in streaming-core.
"""

from __future__ import annotations

import os
import shutil
import warnings
from typing import Any

from streaming.base.storage.providers import check_available, reference_scheme
from streaming_core.errors import DirectoryNotEmptyError
from streaming_core.storage import facade as _storage
from streaming_core.writing.writer import parse_out

__all__ = ['CloudUploader', 'S3Uploader', 'GCSUploader', 'OCIUploader', 'HFUploader', 'AzureUploader',
           'AzureDataLakeUploader', 'DatabricksUnityCatalogUploader', 'DBFSUploader', 'AlipanUploader',
           'LocalUploader']


class CloudUploader:
    """Writes files to a local directory and uploads them to a remote (or, with no remote, just keeps them).

    Args:
        out: A local directory, a remote URL (a temporary local directory is used), or ``(local, remote)``.
        keep_local: Keep local files after they are uploaded.
        progress_bar: Accepted for compatibility (uploads report nothing).
        retry: Retries after the first attempt of each upload.
        exist_ok: Empty a non-empty local directory first instead of refusing.
    """

    _client_identifier: str = ''

    def __init__(self, out: str | tuple[str, str], keep_local: bool = False, progress_bar: bool = False,
                 retry: int = 2, exist_ok: bool = False) -> None:
        if isinstance(out, (tuple, list)) and len(out) != 2:
            raise ValueError(f'Invalid `out` argument: {out!r}. A tuple must be (local directory, remote URL).')
        self.local, self.remote, _ = parse_out(out)
        check_available(reference_scheme(self.remote), self.remote, type(self).__name__)
        self.keep_local = keep_local
        self.progress_bar = progress_bar
        self.retry = retry
        if os.path.isdir(self.local) and os.listdir(self.local):
            if not exist_ok:
                raise DirectoryNotEmptyError(f'Directory is not empty: {self.local}. Pass exist_ok=True to replace its '
                                             f'contents.')
            warnings.warn(f'Directory {self.local} exists and is not empty; its contents are removed.', stacklevel=2)
            shutil.rmtree(self.local)
        os.makedirs(self.local, exist_ok=True)

    @classmethod
    def get(cls, out: str | tuple[str, str], keep_local: bool = False, progress_bar: bool = False, retry: int = 2,
            exist_ok: bool = False) -> 'CloudUploader':
        """The uploader for ``out``'s remote scheme (:class:`LocalUploader` without a remote or for a local path).

        Raises:
            ValueError: a malformed ``out`` or an unsupported scheme.
            NotImplementedError: ``alipan://``, or a provider whose storage plugin is not installed.
            FileExistsError: the local directory is not empty and ``exist_ok`` is false.
        """
        remote = out[1] if isinstance(out, (tuple, list)) and len(out) == 2 else out
        key = reference_scheme(remote) if isinstance(remote, str) else ''
        check_available(key, remote if isinstance(remote, str) else None, 'CloudUploader')
        return _UPLOADERS.get(key, CloudUploader)(out, keep_local, progress_bar, retry, exist_ok)

    def upload_file(self, filename: str) -> None:
        """Upload ``local/filename`` to ``remote/filename`` (nothing without a remote), then remove the local file
        unless ``keep_local``."""
        if not self.remote:
            return
        path = os.path.join(self.local, filename)
        if not os.path.isfile(path):
            raise FileNotFoundError(f'upload_file: no such local file {path}.')
        _storage.upload_file(path, _storage.join(self.remote, *filename.split('/')), retries=self.retry)
        self.clear_local(path)

    def clear_local(self, local: str) -> None:
        """Remove the local file ``local`` after its upload, unless ``keep_local``."""
        if self.remote and not self.keep_local and os.path.isfile(local):
            os.remove(local)

    def list_objects(self, prefix: str | None = None) -> list[str]:
        """The objects under ``prefix``: remote keys (``path/in/bucket``) with a remote, else the sorted full local
        paths that start with ``local/prefix``."""
        if not self.remote:
            start = os.path.join(self.local, prefix or '')
            found = [os.path.join(root, name) for root, _, names in os.walk(self.local) for name in names]
            return sorted(path for path in found if path.startswith(start))
        urls = _storage.list_objects(_storage.join(self.remote, prefix) if prefix else self.remote)
        if reference_scheme(self.remote) == '':
            return urls
        return [_key_of(url) for url in urls]


def _key_of(url: str) -> str:
    """``path/to/key`` of ``scheme://bucket/path/to/key``."""
    rest = url.split('://', 1)[-1]
    return rest.split('/', 1)[1] if '/' in rest else ''


class S3Uploader(CloudUploader):
    """``s3://bucket/prefix`` (``S3_ENDPOINT_URL``, ``S3_CANNED_ACL`` and the AWS environment)."""

    _client_identifier = 's3'


class GCSUploader(CloudUploader):
    """``gs://bucket/prefix``."""

    _client_identifier = 'gs'


class OCIUploader(CloudUploader):
    """``oci://bucket[@namespace]/prefix``."""

    _client_identifier = 'oci'


class HFUploader(CloudUploader):
    """``hf://datasets/org/repo/path`` (needs the ``streaming-hf`` plugin)."""

    _client_identifier = 'hf'


class AzureUploader(CloudUploader):
    """``azure://...`` Blob Storage."""

    _client_identifier = 'azure'


class AzureDataLakeUploader(CloudUploader):
    """``azure-dl://filesystem/path``."""

    _client_identifier = 'azure-dl'


class DatabricksUnityCatalogUploader(CloudUploader):
    """``dbfs:/Volumes/...`` (needs the ``streaming-databricks`` plugin)."""

    _client_identifier = 'dbfs-uc'


class DBFSUploader(CloudUploader):
    """``dbfs:/...`` (needs the ``streaming-databricks`` plugin)."""

    _client_identifier = 'dbfs'


class AlipanUploader(CloudUploader):
    """``alipan://``: not supported by streaming-compat (constructing one raises ``NotImplementedError``)."""

    _client_identifier = 'alipan'


class LocalUploader(CloudUploader):
    """No remote, or a local directory as the "remote" (files are copied)."""

    _client_identifier = ''


_UPLOADERS: dict[str, type[CloudUploader]] = {
    cls._client_identifier: cls for cls in (S3Uploader, GCSUploader, OCIUploader, HFUploader, AzureUploader,
                                            AzureDataLakeUploader, DatabricksUnityCatalogUploader, DBFSUploader,
                                            AlipanUploader, LocalUploader)}


def __getattr__(name: str) -> Any:
    if name == 'UPLOADERS':
        return dict(_UPLOADERS)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
