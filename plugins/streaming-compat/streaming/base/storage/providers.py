"""Which URL schemes the reference's storage classes handle, and how each reaches streaming-core's storage registry.

A scheme is served when a storage plugin registers it (``streaming-s3`` for ``s3``, ``streaming-gcs`` for ``gs``...).
The reference's ``alipan://`` provider is not supported; ``hf://``, ``dbfs:/`` and ``sftp://`` are served once the
plugin that registers the scheme is installed, and otherwise refused with the name of that plugin.
"""

from __future__ import annotations

from urllib.parse import urlparse

from streaming_core.errors import NotSupportedError, UnknownNameError, UnknownSchemeError
from streaming_core.machinery.lookup import get_registry

__all__ = ['PLUGIN_OF', 'reference_scheme', 'check_available', 'core_scheme']

#: The distribution that provides each scheme of the reference (``''``: local paths, always available).
PLUGIN_OF = {'s3': 'streaming-s3', 'gs': 'streaming-gcs', 'oci': 'streaming-oci', 'azure': 'streaming-azure',
             'azure-dl': 'streaming-azure', 'hf': 'streaming-hf', 'dbfs': 'streaming-databricks',
             'dbfs-uc': 'streaming-databricks', 'sftp': 'streaming-sftp'}


def reference_scheme(url: str | None) -> str:
    """The reference's provider key of ``url``: its scheme, ``'dbfs-uc'`` for ``dbfs:/Volumes/...``, ``''`` for a
    local path."""
    if url is None:
        return ''
    parsed = urlparse(url)
    if parsed.scheme == 'dbfs' and parsed.path.startswith('/Volumes'):
        return 'dbfs-uc'
    return parsed.scheme


def core_scheme(key: str) -> str:
    """streaming-core's storage scheme for a reference provider key."""
    return {'': 'file', 'dbfs-uc': 'dbfs'}.get(key, key)


def check_available(key: str, url: str | None, what: str) -> None:
    """Raise a clear error unless streaming-core can serve the provider ``key``.

    Raises:
        NotSupportedError: ``alipan``, or a reference provider whose plugin is not installed (names it).
        UnknownSchemeError: a scheme the reference does not know either (a ``ValueError``, like the reference's).
    """
    if key == 'alipan':
        raise NotSupportedError(f'{what}: alipan:// (Alibaba Cloud Drive) is not supported by streaming-compat '
                                f'(url {url!r}). Copy the data to a supported store (S3, GCS, OCI, Azure, a local '
                                f'path) or write a storage plugin for the scheme.')
    storage = get_registry('storage')
    if core_scheme(key) in storage:
        return
    dist = PLUGIN_OF.get(key)
    if dist is not None:
        raise NotSupportedError(f'{what}: the {key}:// provider needs the distribution {dist!r}, which is not '
                                f'installed (url {url!r}): pip install {dist} (from the repository: '
                                f'plugins/{dist}).')
    try:
        storage.get(core_scheme(key))
    except UnknownNameError as err:
        hint = str(err).partition('\n')[2]
        raise UnknownSchemeError('\n'.join(filter(None, [f'Unsupported remote path: {url}', hint]))) from None
