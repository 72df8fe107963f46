"""A training loop over one dataset mixing MDS, Parquet, WebDataset and litdata streams by proportions, logging every
sample id: ``torchrun ... -m tests.trainers.formats_client CONFIG``.

CONFIG (JSON): ``data`` (``{format: directory}``, as :func:`tests.trainers.formats_data.write_all` returns),
``proportions`` (``{format: proportion}``), ``epoch_size``, ``cache`` (the local cache root: each stream is
downloaded from its directory into ``cache/<format>``), ``run``, ``workers`` (persistent DataLoader workers,
started by ``spawn``), ``batch`` (per device), ``epochs``, ``steps_per_epoch``, ``save`` (the optimizer steps
after which the loader's ``state_dict()`` is saved, as ``step-S``) and ``resume`` (the name of such a state, with
``run_of_resume``).

Like the trainers, the loop derives its epoch from the optimizer steps done (``step // steps_per_epoch``) and calls
``set_epoch`` at the start of each epoch; the log format is the one ``tests/trainers/harness.py`` reads.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
import torch.distributed as dist

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from tests.trainers.formats_data import sample_id


def build(config: dict[str, Any]) -> StreamingDataset:
    """The mixed dataset of CONFIG: one stream per format, downloaded from its directory into the cache."""
    streams = [Stream(remote=config['data'][name], local=os.path.join(config['cache'], name), proportion=proportion)
               for name, proportion in config['proportions'].items()]
    return StreamingDataset(streams=streams, epoch_size=config['epoch_size'], shuffle=True, num_canonical_nodes=2,
                            batch_size=config['batch'], transform=sample_id)


def main(config: dict[str, Any]) -> None:
    """Train (or resume) as CONFIG says."""
    dist.init_process_group('gloo')
    rank = dist.get_rank()
    run = config['run']
    os.makedirs(os.path.join(run, 'ckpt'), exist_ok=True)
    dataset = build(config)
    loader = StreamingDataLoader(dataset, batch_size=config['batch'], num_workers=config['workers'],
                                 multiprocessing_context='spawn' if config['workers'] else None,
                                 persistent_workers=bool(config['workers']))
    step = 0
    if config.get('resume'):  # the loader's state is global: any rank's copy resumes any number of ranks
        saved = torch.load(os.path.join(config['run_of_resume'], 'ckpt', f'{config["resume"]}-rank0.pt'),
                           weights_only=False)
        loader.load_state_dict(saved['loader'])
        step = saved['step']
    model = torch.nn.Linear(1, 1)  # updated by hand: importing torch.optim costs each process seconds (dynamo)
    per_epoch = config['steps_per_epoch']
    with open(os.path.join(run, f'log-rank{rank}.jsonl'), 'a') as log:
        for epoch in range(step // per_epoch, config['epochs']):
            dataset.set_epoch(epoch)
            for batch in loader:
                ids = [int(i) for i in batch.tolist()]
                log.write(json.dumps({'epoch': epoch, 'step': step, 'ids': ids}) + '\n')
                log.flush()
                x = batch.float().view(-1, 1) / 4000
                loss = torch.nn.functional.mse_loss(model(x), 2 * x)
                model.zero_grad()
                loss.backward()
                with torch.no_grad():
                    for parameter in model.parameters():
                        parameter -= 0.01 * parameter.grad
                step += 1
                if step in config.get('save', ()):
                    torch.save({'loader': loader.state_dict(), 'step': step},
                               os.path.join(run, 'ckpt', f'step-{step}-rank{rank}.pt'))
    dist.destroy_process_group()


if __name__ == '__main__':
    main(json.loads(sys.argv[1]))
