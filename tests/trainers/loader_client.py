"""One process of the loader-rule checks: ``python -m tests.trainers.loader_client CONFIG``.

CONFIG (JSON): ``data``, ``out`` (a JSON file: the ids read and the state), ``dataset_batch`` (or null),
``loader_batch``, ``workers``, ``stop`` (batches read before saving the state; null reads the whole epoch) and
``state`` (a state file to resume from, or null).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from streaming_core import StreamingDataLoader, StreamingDataset


def main(config: dict[str, Any]) -> None:
    """Read (part of) an epoch as CONFIG says; write the ids read and the loader's state."""
    dataset = StreamingDataset(local=config['data'], split='train', shuffle=True,
                               batch_size=config['dataset_batch'])
    loader = StreamingDataLoader(dataset, batch_size=config['loader_batch'], num_workers=config['workers'])
    if config.get('state'):
        with open(config['state']) as handle:
            loader.load_state_dict(json.load(handle)['state'])
    ids: list[int] = []
    for index, batch in enumerate(loader):
        ids += [int(i) for i in batch['id'].tolist()]
        if config.get('stop') is not None and index + 1 == config['stop']:
            break
    with open(config['out'], 'w') as handle:
        json.dump({'ids': ids, 'state': loader.state_dict()}, handle)


if __name__ == '__main__':
    main(json.loads(sys.argv[1]))
