"""One rank of a job whose dataset may change while the ranks start (tests/test_rank_versions.py).

Usage: python -m tests.workers.version_rank CONFIG_JSON OUTPUT_JSON (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
from the environment). The config says when to join the gloo group (before or after constructing the dataset, as a
Lightning DataModule built in ``__init__`` does), a file to wait for before constructing (the test rewrites the
dataset meanwhile), a file to create once constructed, a file to wait for before exiting (rank 0, which hosts the
group's store, waits for rank 1's output), and the DataLoader's workers and start method. The output records the
sample ids read, or the error's type and message.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch.distributed as dist
from torch.utils.data import DataLoader


def _wait_for(path: str | None) -> None:
    deadline = time.monotonic() + 120
    while path and not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f'{path} never appeared')
        time.sleep(0.02)


def main() -> None:
    config = json.loads(sys.argv[1])
    out_path = sys.argv[2]
    rank = int(os.environ['RANK'])
    mine = config['ranks'][str(rank)]
    from streaming_core import StreamingDataset
    result: dict = {}
    try:
        if config['init'] == 'before':
            dist.init_process_group('gloo', rank=rank, world_size=int(os.environ['WORLD_SIZE']))
        _wait_for(mine.get('wait'))
        dataset = StreamingDataset(**{**config['dataset'], **mine.get('dataset', {})})
        if mine.get('built'):
            open(mine['built'], 'w').close()
        if config['init'] == 'after':
            dist.init_process_group('gloo', rank=rank, world_size=int(os.environ['WORLD_SIZE']))
        result['len'] = len(dataset)
        if not mine.get('iterate', True):  # its files were rewritten under it (that rank fails on its own)
            return
        workers = config['workers']
        loader = DataLoader(dataset, batch_size=config['dataset']['batch_size'], num_workers=workers,
                            multiprocessing_context=config.get('context') if workers else None)
        result['ids'] = [i for batch in loader for i in batch['id'].tolist()]
    except Exception as err:
        result['error'] = [type(err).__name__, str(err)]
    finally:
        with open(out_path, 'w') as handle:
            json.dump(result, handle)
    try:  # rank 0 hosts the group's store: it stays until rank 1 is done (its check needs the store)
        _wait_for(mine.get('linger'))
    except TimeoutError:
        pass


if __name__ == '__main__':
    main()
