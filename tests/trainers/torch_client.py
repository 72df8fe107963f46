"""A plain training loop that logs every sample id: ``torchrun ... -m tests.trainers.torch_client CONFIG``.

CONFIG (JSON): ``data``, ``run``, ``loader`` (``'streaming'``: our StreamingDataLoader; ``'stateful'``: torchdata's
StatefulDataLoader), ``workers``, ``batch`` (per device), ``epochs``, ``steps_per_epoch``, ``tuples`` (samples become
``(id, data)`` tuples and the collate_fn keeps them as a list, as the COCO recipe does), ``save`` (a state after
every step, ``step-S``, and after every epoch's loop, ``epochend-E``) and ``resume`` (the name of such a state).

Like the trainers, the loop derives its epoch from the optimizer steps done (``step // steps_per_epoch``) and calls
``set_epoch`` at the start of each epoch.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
import torch.distributed as dist

from streaming_core import StreamingDataLoader, StreamingDataset


def as_tuple(sample: dict[str, Any]) -> tuple[int, bytes]:
    """A per-sample transform that turns a sample into an ``(id, payload)`` tuple."""
    return int(sample['id']), bytes(sample['data'])


def keep_list(samples: list[Any]) -> list[Any]:
    """A collate_fn that keeps the samples as a list."""
    return list(samples)


def ids_of(batch: Any) -> list[int]:
    """The sample ids of a batch of dicts (collated) or of a list of tuples."""
    if isinstance(batch, list):
        return [int(item[0]) for item in batch]
    return [int(i) for i in batch['id'].tolist()]


def main(config: dict[str, Any]) -> None:
    """Train (or resume) as CONFIG says."""
    dist.init_process_group('gloo')
    rank = dist.get_rank()
    run = config['run']
    os.makedirs(os.path.join(run, 'ckpt'), exist_ok=True)
    tuples = bool(config.get('tuples'))
    dataset = StreamingDataset(local=config['data'], split='train', shuffle=True, num_canonical_nodes=2,
                               batch_size=config['batch'] if config['loader'] == 'stateful' else None,
                               transform=as_tuple if tuples else None)
    kwargs = dict(batch_size=config['batch'], num_workers=config['workers'],
                  collate_fn=keep_list if tuples else None)
    if config['loader'] == 'stateful':
        from torchdata.stateful_dataloader import StatefulDataLoader
        loader = StatefulDataLoader(dataset, **kwargs)
    else:
        loader = StreamingDataLoader(dataset, **kwargs)
    step = 0
    if config.get('resume'):
        shard = 0 if config['loader'] == 'streaming' else rank  # our state is global; torchdata's is per rank
        saved = torch.load(os.path.join(config['run_of_resume'], 'ckpt', f'{config["resume"]}-rank{shard}.pt'),
                           weights_only=False)
        loader.load_state_dict(saved['loader'])
        step = saved['step']
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    per_epoch = config['steps_per_epoch']

    def save(name: str) -> None:
        torch.save({'loader': loader.state_dict(), 'step': step},
                   os.path.join(run, 'ckpt', f'{name}-rank{rank}.pt'))

    with open(os.path.join(run, f'log-rank{rank}.jsonl'), 'a') as log:
        for epoch in range(step // per_epoch, config['epochs']):
            dataset.set_epoch(epoch)
            for batch in loader:
                ids = ids_of(batch)
                log.write(json.dumps({'epoch': epoch, 'step': step, 'ids': ids}) + '\n')
                log.flush()
                x = torch.tensor(ids, dtype=torch.float32).view(-1, 1) / 1000
                loss = torch.nn.functional.mse_loss(model(x), 2 * x)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
                if config.get('save'):
                    save(f'step-{step}')
            if config.get('save'):
                save(f'epochend-{epoch}')
    dist.destroy_process_group()


if __name__ == '__main__':
    main(json.loads(sys.argv[1]))
