"""Parsing of ``azure://`` and ``azure-dl://`` URLs, including the reference's two ``azure://`` forms.

The reference reads ``azure://<account>[.blob.core.windows.net]/<container>/<blob>`` but uploads to
``azure://<container>/<path>``. Both are accepted here, and one rule picks the reading:

1. **Host form**, unambiguous: the netloc has a dot (``azure://myacct.blob.core.windows.net/container/blob``);
   the account is its first label, the container the first path segment.
2. ``url_form='container'`` or ``url_form='account'`` (a storage option) forces the reading.
3. Otherwise (``'auto'``), with an account configured (``account`` option, the connection string,
   ``$AZURE_ACCOUNT_NAME``, or the ``account_url``): a netloc equal to that account is the **account form**
   (``azure://myacct/container/blob``, the reference's download form) and any other netloc is the **container
   form** (``azure://container/blob``, the reference's upload form). With no account configured, the netloc is the
   account (as in both of the reference's code paths).

Recommended: configure the account and write ``azure://<container>/<path>`` everywhere; it reads and writes
the same objects. ``azure-dl://<filesystem>/<path>`` has one form (plus ``azure-dl://<fs>@<account>.dfs...``).
"""

from __future__ import annotations

from dataclasses import dataclass

from streaming_core.plugin_api import PermanentStorageError, StorageURL, redact_url

__all__ = ['AzureLocation', 'parse_blob_url', 'parse_datalake_url', 'URL_FORMS']

URL_FORMS = ('auto', 'container', 'account')


@dataclass(frozen=True)
class AzureLocation:
    """Where a URL points: the account (``None`` when it comes from configuration), container and path.

    ``base`` is the URL text up to and including the container, used to build listing results in the same form
    as the input.
    """

    account: str | None
    container: str
    path: str
    base: str


def _parts(url: str, scheme: str) -> tuple[str, str]:
    where = StorageURL.parse(url, scheme=scheme, bucket_word='container or account', usage='', literal_key=True)
    return where.netloc, where.key


def parse_blob_url(url: str, *, account: str | None, url_form: str = 'auto', need_path: bool) -> AzureLocation:
    """Resolve an ``azure://`` URL against the configured ``account`` (see the module docstring for the rule).

    Raises:
        PermanentStorageError: for another scheme, a missing container, a missing blob (with ``need_path``), an
            unknown ``url_form``, or the account form with no container.
    """
    if url_form not in URL_FORMS:
        raise PermanentStorageError(f'Invalid azure option url_form={url_form!r}: use one of {URL_FORMS}.')
    netloc, path = _parts(url, 'azure')
    shown = redact_url(url)
    if '.' in netloc:
        form, url_account = 'account', netloc.split('.')[0]
    elif url_form == 'container':
        form, url_account = 'container', None
    elif url_form == 'account':
        form, url_account = 'account', netloc
    elif account and netloc != account:
        form, url_account = 'container', None
    else:
        form, url_account = 'account', netloc
    if form == 'container':
        container, blob, base = netloc, path, f'azure://{netloc}/'
    else:
        container, _, blob = path.partition('/')
        if not container:
            raise PermanentStorageError(f'Invalid azure URL {shown}: read as azure://<account>/<container>/<blob>, it '
                                        f'names no container. Use azure://<container>/<path> with the account '
                                        f'configured, or azure://<account>.blob.core.windows.net/<container>/<path>.')
        base = f'azure://{netloc}/{container}/'
    if need_path and (not blob or blob.endswith('/')):
        raise PermanentStorageError(f'Invalid azure URL {shown}: it names no blob (container {container!r}).')
    return AzureLocation(url_account, container, blob, base)


def parse_datalake_url(url: str, *, need_path: bool) -> AzureLocation:
    """Resolve ``azure-dl://<filesystem>/<path>`` or ``azure-dl://<filesystem>@<account>.dfs.../<path>``.

    Raises:
        PermanentStorageError: for another scheme, a missing filesystem, or a missing path (with ``need_path``).
    """
    netloc, path = _parts(url, 'azure-dl')
    filesystem, at, host = netloc.partition('@')
    account = host.split('.')[0] if at else None
    if not filesystem or (at and not account):
        raise PermanentStorageError(f'Invalid azure-dl URL {redact_url(url)}: use azure-dl://<filesystem>/<path> or '
                                    f'azure-dl://<filesystem>@<account>.dfs.core.windows.net/<path>.')
    if need_path and (not path or path.endswith('/')):
        raise PermanentStorageError(f'Invalid azure-dl URL {redact_url(url)}: it names no file.')
    return AzureLocation(account, filesystem, path, f'azure-dl://{netloc}/')
