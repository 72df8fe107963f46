"""One training rank: join a gloo process group, iterate a StreamingDataset through a DataLoader, record batches.

Usage: python -m tests.workers.rank CONFIG_JSON OUTPUT_JSON  (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and
MASTER_PORT come from the environment, as torchrun sets them).
"""

from __future__ import annotations

import json
import os
import sys

import torch.distributed as dist
from torch.utils.data import DataLoader


def main() -> None:
    config = json.loads(sys.argv[1])
    out_path = sys.argv[2]
    if config.get('init_dist', True):
        dist.init_process_group('gloo', rank=int(os.environ['RANK']), world_size=int(os.environ['WORLD_SIZE']))
    from streaming_core import StreamingDataLoader, StreamingDataset
    dataset = StreamingDataset(**config['dataset'])
    loader_cls = StreamingDataLoader if config.get('streaming_loader') else DataLoader
    loader = loader_cls(dataset, batch_size=config['dataset']['batch_size'], num_workers=config['workers'],
                        persistent_workers=config['workers'] > 0 and config.get('persistent', False))
    if config.get('resume'):
        loader.load_state_dict(config['resume'])
    epochs = []
    state = None
    for epoch in range(config.get('epochs', 1)):
        batches = []
        for i, batch in enumerate(loader):
            batches.append(batch['id'].tolist())
            if config.get('stop_after') is not None and epoch == 0 and i + 1 == config['stop_after']:
                state = loader.state_dict()
                break
        epochs.append(batches)
    with open(out_path, 'w') as handle:
        json.dump({'epochs': epochs, 'state': state, 'len': len(dataset)}, handle)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == '__main__':
    main()
