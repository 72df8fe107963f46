"""Make sure a "reference" run really imported mosaicml-streaming, never our ``streaming`` (streaming-compat).

Once streaming-compat can be installed, ``import streaming`` may find either package. Every harness that compares
with the reference calls :func:`assert_reference_streaming` in the process that runs the reference, so a comparison
can never be ours against ours. It has no dependencies beyond the standard library (it runs in ``.venv-ref``), and
the same check is available as a code snippet (:data:`GUARD_SNIPPET`) for scripts that are passed as strings.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import sys
from types import ModuleType

__all__ = ['REFERENCE_DISTRIBUTION', 'REFERENCE_VERSION', 'NotTheReferenceError', 'assert_reference_streaming',
           'GUARD_SNIPPET']

REFERENCE_DISTRIBUTION = 'mosaicml-streaming'
REFERENCE_VERSION = '0.13.0'
_OURS = os.path.realpath(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '.venv'))


class NotTheReferenceError(RuntimeError):
    """``import streaming`` did not import mosaicml-streaming 0.13 from the reference virtualenv."""


def assert_reference_streaming(module: ModuleType | None = None) -> str:
    """Check that ``module`` (default: ``import streaming``) is mosaicml-streaming 0.13's package, installed by that
    distribution in the running interpreter's (reference) virtualenv, and not streaming-compat; return its path.

    Raises:
        NotTheReferenceError: naming what was imported instead.
    """
    if module is None:
        import streaming as module  # noqa: PLC0415 - the point is to see which one this finds
    path = os.path.realpath(getattr(module, '__file__', '') or '')
    if getattr(module, 'ENGINE', None) == 'streaming-core':
        raise NotTheReferenceError(f'import streaming found streaming-compat (our engine) at {path}, not '
                                   f'{REFERENCE_DISTRIBUTION}: a reference comparison would compare ours with ours. '
                                   f'Run it with the reference virtualenv (compat/setup.sh builds .venv-ref).')
    try:
        dist = md.distribution(REFERENCE_DISTRIBUTION)
    except md.PackageNotFoundError:
        raise NotTheReferenceError(f'{REFERENCE_DISTRIBUTION} is not installed for {sys.executable}; '
                                   f'import streaming found {path}.') from None
    if dist.version != REFERENCE_VERSION:
        raise NotTheReferenceError(f'{REFERENCE_DISTRIBUTION} {dist.version} is installed; the comparisons are '
                                   f'against {REFERENCE_VERSION}.')
    owned = {os.path.realpath(str(dist.locate_file(f))) for f in (dist.files or [])
             if str(f).replace(os.sep, '/') == 'streaming/__init__.py'}
    if path not in owned:
        raise NotTheReferenceError(f'import streaming found {path}, which the {REFERENCE_DISTRIBUTION} distribution '
                                   f'did not install (it installed {sorted(owned)}).')
    prefix = os.path.realpath(sys.prefix)
    if not path.startswith(prefix + os.sep) or prefix == _OURS:
        raise NotTheReferenceError(f'import streaming found {path}, outside the reference virtualenv {prefix} (or '
                                   f'this is our own virtualenv).')
    return path


#: The same check for scripts given as strings (``python -c``/stdin): prepend it; it needs the repository root on
#: ``sys.path`` or falls back to a minimal inline check.
GUARD_SNIPPET = '''
import streaming as _streaming_checked
assert getattr(_streaming_checked, 'ENGINE', None) != 'streaming-core', (
    'import streaming found streaming-compat, not mosaicml-streaming: ' + _streaming_checked.__file__)
import importlib.metadata as _md
assert _md.version('mosaicml-streaming') == '0.13.0', 'mosaicml-streaming 0.13.0 is not installed'
'''
