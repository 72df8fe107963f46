"""Names kept for code written against mosaicml-streaming; each does what is still meaningful here.

streaming-core keeps no named shared memory and no global registrations, so there is nothing stale to clean:
:func:`clean_stale_shared_memory` is a harmless no-op kept so existing scripts run unchanged.
"""

from __future__ import annotations

import os
import time

__all__ = ['clean_stale_shared_memory', 'wait_for_file_to_exist', 'get_import_exception_message']


def clean_stale_shared_memory() -> None:
    """No-op: streaming-core never creates named shared memory, so a crash leaves nothing to clean."""


def wait_for_file_to_exist(filename: str, poll_interval: float, timeout: float, err_msg: str = '') -> None:
    """Wait until ``filename`` exists, polling every ``poll_interval`` seconds, or raise ``RuntimeError``."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(filename):
        if time.monotonic() >= deadline:
            raise RuntimeError(f'{err_msg} File {filename} did not appear within {timeout} seconds.'.strip())
        time.sleep(poll_interval)


def get_import_exception_message(package_name: str, extra_deps: str) -> str:
    """The message for a missing optional dependency."""
    return (f'Streaming was installed without {package_name} support. To use {package_name}-related '
            f'functionality, run `pip install {extra_deps}`.')
