"""``streaming.base.batching``: the reference's ``generate_work`` over a dataset's epoch plan.

``generate_work(method, dataset, world, epoch, sample_in_epoch)`` returns the whole world's sample ids for one epoch
(``-1`` for padding) exactly as the reference does; it is ``dataset.get_plan(world, epoch, sample_in_epoch)``, with
``world`` a :class:`streaming.base.world.World` (or streaming-core's).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ['generate_work', 'generate_work_random_batching', 'generate_work_stratified_batching',
           'generate_work_per_stream_batching', 'generate_work_device_per_stream_batching']


def generate_work(batching_method: str, dataset: Any, world: Any, epoch: int,
                  sample_in_epoch: int) -> NDArray[np.int64]:
    """The epoch plan of ``dataset`` for ``world`` with ``batching_method`` (it must be the dataset's own)."""
    if batching_method != dataset.batching_method:
        raise ValueError(f'generate_work: batching_method {batching_method!r} differs from the dataset\'s '
                         f'{dataset.batching_method!r}; construct the dataset with batching_method='
                         f'{batching_method!r}.')
    return dataset.get_plan(world, epoch, sample_in_epoch)


def _method(name: str) -> Any:
    def generate(dataset: Any, world: Any, epoch: int, sample_in_epoch: int) -> NDArray[np.int64]:
        return generate_work(name, dataset, world, epoch, sample_in_epoch)
    generate.__name__ = generate.__qualname__ = f'generate_work_{name}_batching'
    generate.__doc__ = f'``generate_work({name!r}, ...)``.'
    return generate


generate_work_random_batching = _method('random')
generate_work_stratified_batching = _method('stratified')
generate_work_per_stream_batching = _method('per_stream')
generate_work_device_per_stream_batching = _method('device_per_stream')
