"""``hf://`` URLs: ``hf://{datasets|models}/{owner}/{name}[@{revision}]/{path}``.

The revision is a branch, a tag or a commit. A revision containing ``/`` is written percent-encoded
(``@refs%2Fconvert%2Fparquet``), as ``huggingface_hub.HfFileSystem`` does; ``refs/convert/parquet`` and
``refs/pr/N`` are also accepted as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from streaming_core.plugin_api import PermanentStorageError

__all__ = ['HfURL', 'parse_hf_url', 'REPO_TYPES']

#: URL segment -> the Hub's repository type.
REPO_TYPES = {'datasets': 'dataset', 'models': 'model'}
_SPECIAL_REFS = re.compile(r'(refs/(?:convert/[^/]+|pr/\d+))(?:/(.*))?\Z')
_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*\Z')


@dataclass(frozen=True)
class HfURL:
    """A parsed ``hf://`` URL.

    Attributes:
        kind: ``'datasets'`` or ``'models'`` (the URL segment).
        repo: ``owner/name``.
        revision: The revision written in the URL (``None``: the default branch, ``main``).
        path: The path inside the repository (``''`` for its root), without a leading ``/``.
        root: The URL up to the repository and revision, as written (``hf://datasets/owner/name@v1``).
    """

    kind: str
    repo: str
    revision: str | None
    path: str
    root: str

    @property
    def repo_type(self) -> str:
        """``'dataset'`` or ``'model'``."""
        return REPO_TYPES[self.kind]

    def with_path(self, path: str) -> str:
        """The ``hf://`` URL of another path of the same repository and revision, spelled as this one."""
        return f'{self.root}/{path}' if path else self.root

    def quoted_revision(self, default: str = 'main') -> str:
        """The revision for a Hub API path (``/`` percent-encoded)."""
        return quote(self.revision or default, safe='')


def parse_hf_url(url: str) -> HfURL:
    """Parse ``hf://datasets/owner/name[@revision]/path``.

    Raises:
        PermanentStorageError: not such a URL, naming it and the expected form.
    """
    form = 'hf://datasets/{owner}/{name}[@{revision}]/{path}'
    if not url.startswith('hf://'):
        raise PermanentStorageError(f'{url!r} is not an hf:// URL; expected {form}.')
    rest = url[len('hf://'):]
    parts = rest.split('/', 3)
    if len(parts) < 3 or parts[0] not in REPO_TYPES:
        raise PermanentStorageError(f'{url!r}: expected {form} (or hf://models/...); the first segment must be '
                                    f'"datasets" or "models".')
    kind, owner, tail = parts[0], parts[1], '/'.join(parts[2:])
    name, revision, path = tail, None, ''
    if '@' in tail.split('/', 1)[0]:
        name, after = tail.split('@', 1)
        special = _SPECIAL_REFS.match(after)
        if special:
            revision, path = special.group(1), special.group(2) or ''
        else:
            revision, _, path = after.partition('/')
            revision = unquote(revision)
        if not revision:
            raise PermanentStorageError(f'{url!r}: an empty revision after "@".')
    else:
        name, _, path = tail.partition('/')
    for value, what in ((owner, 'owner'), (name, 'name')):
        if not _NAME.match(value or ''):
            raise PermanentStorageError(f'{url!r}: invalid repository {what} {value!r}; expected {form}.')
    root = url[:len(url) - len(path)].rstrip('/') if path else url.rstrip('/')
    return HfURL(kind, f'{owner}/{name}', revision, path.strip('/'), root)
