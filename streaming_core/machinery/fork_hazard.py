"""A warning, once per process, where forking DataLoader workers can hang them for ever (CPython gh-112275).

On CPython 3.8 to 3.11 before the September 2024 fix (3.8.20, 3.9.20, 3.10.15, 3.11.10), a child forked while another
thread of the parent creates its Python thread state deadlocks inside ``os.fork()``: the child inherits the
interpreter's thread-list lock held and waits on it before any Python code runs. Python 3.12 is not affected. With
``torch.distributed``, the threads of the process group (gloo's ``pt_gloo_runloop``, NCCL's watchdog) enter Python
when a collective finishes, so a DataLoader worker forked right after one (Lightning forks its loaders' workers
after its barriers) sometimes never starts, and its rank waits for its first batch for ever while the other ranks
wait in their next collective. The suite saw it in 2 of 37 runs of the Lightning guide's ``ddp`` script on a loaded
2-core machine with Python 3.11.7 (the stacks: ``PyOS_AfterFork_Child`` -> ``_PyThreadState_DeleteExcept`` -> a lock
wait in the child; a ``pt_gloo_runloop`` thread creating its thread state in the parent).

No code in the parent can close that window, so :func:`install` registers a fork handler that warns
(:class:`ForkDeadlockWarning`, once per process) when a process with an initialized ``torch.distributed`` process
group forks on an affected Python, and says what avoids it: a Python with the fix, or
``multiprocessing_context='forkserver'`` (or ``'spawn'``) on the DataLoader.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

__all__ = ['ForkDeadlockWarning', 'affected', 'install', 'MESSAGE']

logger = logging.getLogger('streaming_core.machinery.fork_hazard')

#: The first release of each affected minor version with the fix.
FIXED_IN = {(3, 8): 20, (3, 9): 20, (3, 10): 15, (3, 11): 10}

MESSAGE = (
    'This process forks (DataLoader workers) while a torch.distributed process group is active, on Python {version}, '
    'which has CPython bug gh-112275: a child forked while a thread of the process group enters Python hangs for ever '
    'inside os.fork(), and its rank waits for that worker\'s first batch for ever. It is rare, but it stops the job. '
    'Upgrade Python (3.12+, or {fixed} or later), or pass multiprocessing_context="forkserver" (or "spawn") to the '
    'DataLoader.')


class ForkDeadlockWarning(RuntimeWarning):
    """Forked DataLoader workers can hang at start on this Python (see :mod:`streaming_core.machinery.fork_hazard`)."""


def affected(version: tuple[int, ...] = tuple(sys.version_info[:3]),
             implementation: str = sys.implementation.name) -> bool:
    """Whether CPython ``version`` (major, minor, micro) has gh-112275."""
    if implementation != 'cpython':
        return False
    fixed = FIXED_IN.get(tuple(version[:2]))
    return fixed is not None and version[2] < fixed


def _process_group_active() -> bool:
    dist = sys.modules.get('torch.distributed')
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except Exception:  # a broken or half-imported torch: no opinion
        return False


_state = {'installed': False, 'warned': False}


def _after_in_parent() -> None:
    if _state['warned'] or not affected() or not _process_group_active():
        return
    _state['warned'] = True
    major, minor, micro = sys.version_info[:3]
    message = MESSAGE.format(version=f'{major}.{minor}.{micro}', fixed=f'{major}.{minor}.{FIXED_IN[(major, minor)]}')
    try:
        warnings.warn(message, ForkDeadlockWarning, stacklevel=2)
    except Exception:  # warnings made errors: a fork handler cannot raise, so it is logged instead
        logger.warning(message)


def install() -> None:
    """Register the fork handler (idempotent)."""
    if not _state['installed']:
        _state['installed'] = True
        os.register_at_fork(after_in_parent=_after_in_parent)
