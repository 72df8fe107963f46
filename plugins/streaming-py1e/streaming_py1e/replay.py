"""Advancing a numpy ``Generator`` exactly as a call would, without producing (or storing) the output.

The reference shuffles draw from one epoch rng across all canonical nodes, so computing one node's share needs
the rng state after every earlier node. These helpers replay the earlier draws cheaply:

* ``Generator.shuffle`` draws depend only on the length (never on the contents), so shuffling a scratch byte
  buffer of the same length advances the rng identically;
* ``Generator.uniform(lo, hi, n)`` takes exactly ``n`` 64-bit outputs, so ``PCG64.advance(n)`` skips it in O(1),
  once the cached 32-bit half (which ``advance`` clears, and ``uniform`` leaves alone) is restored.
"""

from __future__ import annotations

import numpy as np

__all__ = ['Scratch', 'skip_uniform']


class Scratch:
    """A reusable byte buffer whose shuffles advance an rng like shuffling any array of the same length."""

    def __init__(self) -> None:
        self._buf = np.empty(0, np.uint8)

    def shuffle(self, rng: np.random.Generator, n: int) -> None:
        """Advance ``rng`` as ``rng.shuffle(x)`` would for ``len(x) == n``."""
        if n < 2:
            return
        if len(self._buf) < n:
            self._buf = np.empty(max(n, 2 * len(self._buf)), np.uint8)
        rng.shuffle(self._buf[:n])


def skip_uniform(rng: np.random.Generator, n: int) -> None:
    """Advance ``rng`` as ``rng.uniform(lo, hi, n)`` would (``n`` 64-bit draws; the 32-bit cache untouched)."""
    if n <= 0:
        return
    bit_generator = rng.bit_generator
    state = bit_generator.state
    has_uint32, uinteger = state['has_uint32'], state['uinteger']
    bit_generator.advance(n)
    if has_uint32:
        state = bit_generator.state
        state['has_uint32'], state['uinteger'] = has_uint32, uinteger
        bit_generator.state = state
