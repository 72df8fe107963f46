"""``streaming.base.constant``: the reference's named constants, kept so code that imports them still imports.

streaming-core creates no named shared memory, so the shared-memory names below name nothing here.
"""

from __future__ import annotations

__all__ = ['TICK', 'DEFAULT_TIMEOUT', 'LOCALS', 'BARRIER', 'CACHE_USAGE', 'EPOCH_DATA', 'EPOCH_SHAPE', 'NEXT_EPOCH',
           'RESUME', 'SHARD_ACCESS_TIMES', 'SHARD_STATES', 'SHM_TO_CLEAN', 'BARRIER_FILELOCK', 'CACHE_FILELOCK']

#: The reference's polling interval in seconds.
TICK = 0.007
#: The reference's default wait, in seconds.
DEFAULT_TIMEOUT = 60.0

LOCALS = 'locals'
BARRIER = 'barrier'
NEXT_EPOCH = 'next_epoch'
CACHE_USAGE = 'cache_usage'
SHARD_STATES = 'shard_states'
SHARD_ACCESS_TIMES = 'shard_access_times'
RESUME = 'resume'
EPOCH_SHAPE = 'epoch_shape'
EPOCH_DATA = 'epoch_data'
SHM_TO_CLEAN = [LOCALS, BARRIER, NEXT_EPOCH, CACHE_USAGE, SHARD_STATES, SHARD_ACCESS_TIMES, RESUME, EPOCH_SHAPE,
                EPOCH_DATA]
BARRIER_FILELOCK = 'barrier_filelock'
CACHE_FILELOCK = 'cache_filelock'
