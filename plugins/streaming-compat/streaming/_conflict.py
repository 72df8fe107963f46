"""Refuse to run beside mosaicml-streaming: both distributions provide the top-level package ``streaming``.

When both are installed, which one ``import streaming`` finds depends on the order of ``sys.path`` and on which was
installed last (their files overwrite each other in ``site-packages``), so a job could silently run on either
engine. :func:`check_no_reference` turns that into one clear error at import.
"""

from __future__ import annotations

import importlib.metadata as md
import os

__all__ = ['REFERENCE_DISTRIBUTION', 'ReferenceInstalledError', 'find_reference', 'check_no_reference']

#: The distribution whose top-level package ``streaming`` this one replaces.
REFERENCE_DISTRIBUTION = 'mosaicml-streaming'
#: Set to ``1`` to skip the check (only for tools that inspect both installations on purpose).
SKIP_ENV = 'STREAMING_COMPAT_ALLOW_REFERENCE'


class ReferenceInstalledError(ImportError):
    """mosaicml-streaming is installed in the same environment as streaming-compat."""


def find_reference() -> str | None:
    """Where an installed mosaicml-streaming distribution lives (its metadata directory), or None."""
    try:
        dist = md.distribution(REFERENCE_DISTRIBUTION)
    except md.PackageNotFoundError:
        return None
    path = getattr(dist, '_path', None)  # the .dist-info directory for path-based distributions
    return str(path) if path is not None else f'{REFERENCE_DISTRIBUTION} {dist.version}'


def check_no_reference() -> None:
    """Raise :class:`ReferenceInstalledError` when mosaicml-streaming is installed beside streaming-compat."""
    if os.environ.get(SKIP_ENV) == '1':
        return
    where = find_reference()
    if where is None:
        return
    raise ReferenceInstalledError(
        f'Both streaming-compat and {REFERENCE_DISTRIBUTION} are installed ({where}); both provide the package '
        f'`streaming`, so which one runs would depend on install order. streaming-compat is installed instead of '
        f'{REFERENCE_DISTRIBUTION}: run `pip uninstall {REFERENCE_DISTRIBUTION}` (then reinstall streaming-compat, '
        f'whose files the uninstall may have removed), or use a separate virtualenv for the reference.')
