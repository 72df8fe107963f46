"""One training rank for the load, fault and kill tests.

Usage: python -m tests.hardening.workers.train CONFIG_JSON OUTPUT_JSON

CONFIG keys:
    streams: list of ``Stream`` keyword dicts (``remote``, ``local``, ``repeat``, ``storage_options``...).
    dataset: ``StreamingDataset`` keyword arguments (``batch_size`` is required).
    workers: DataLoader ``num_workers``.
    epochs: How many epochs to run in total (a resumed run continues from the state's epoch).
    init_dist: Join a gloo process group (RANK, WORLD_SIZE, MASTER_* from the environment). Default True.
    steps_log: A file (``{rank}`` is replaced by the rank) this rank appends one JSON line to after every batch:
        ``{"epoch", "step", "ids", "state"}`` (``state`` is the loader's ``state_dict()`` after the batch), flushed,
        so a SIGKILL loses at most the line being written.
    resume: A state dict to resume from (its ``epoch`` is where the run starts).
    pid_dir: A directory where each DataLoader worker writes a file named after its pid when it starts.
    sleep: Seconds to sleep after each batch (gives a killer something to hit).
    check_data: Check every sample's ``data`` column against ``tests.fixtures.data.sample(id)``.

OUTPUT: ``{"epochs": {epoch: [[ids of each batch]...]}, "mismatches": [...], "len": n}``, or on an exception in the
training loop ``{"error": {"type", "mro", "message", "later", "seconds", "traceback"}}`` (``later``: the messages
of exceptions raised while the first was being recorded) and exit status 3.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def _worker_init(pid_dir: str | None):
    def init(worker_id: int) -> None:
        if pid_dir:
            rank = os.environ.get('RANK', '0')
            with open(os.path.join(pid_dir, f'rank{rank}-worker{worker_id}-{os.getpid()}'), 'w'):
                pass
    return init


def _write_error(out_path: str, errors: list[BaseException], seconds: float) -> None:
    first = errors[0]
    record = {'type': type(first).__name__, 'mro': [c.__name__ for c in type(first).__mro__],
              'message': str(first), 'later': [str(e) for e in errors[1:]], 'seconds': seconds,
              'traceback': ''.join(traceback.format_exception(first))}
    with open(out_path, 'w') as handle:
        json.dump({'error': record}, handle)


def main() -> None:
    config = json.loads(sys.argv[1])
    out_path = sys.argv[2]
    import torch.distributed as dist
    if config.get('init_dist', True):
        dist.init_process_group('gloo', rank=int(os.environ['RANK']), world_size=int(os.environ['WORLD_SIZE']))
    from streaming_core import Stream, StreamingDataLoader, StreamingDataset
    from tests.fixtures.data import sample

    streams = [Stream(**spec) for spec in config['streams']]
    dataset = StreamingDataset(streams=streams, **config['dataset'])
    workers = int(config.get('workers', 0))
    loader = StreamingDataLoader(dataset, batch_size=config['dataset']['batch_size'], num_workers=workers,
                                 worker_init_fn=_worker_init(config.get('pid_dir')) if workers else None)
    first_epoch = 0
    if config.get('resume'):
        loader.load_state_dict(config['resume'])
        first_epoch = int(config['resume']['epoch'])
    log = open(config['steps_log'].format(rank=os.environ.get('RANK', '0')), 'a') if config.get('steps_log') else None
    epochs: dict[str, list[list[int]]] = {}
    mismatches: list[int] = []
    sleep = float(config.get('sleep', 0.0))
    start = time.monotonic()
    try:
        for epoch in range(first_epoch, int(config.get('epochs', 1))):
            batches = epochs.setdefault(str(epoch), [])
            for step, batch in enumerate(loader):
                ids = batch['id'].tolist()
                batches.append(ids)
                if config.get('check_data'):
                    for i, data in zip(ids, batch['data']):
                        if bytes(data) != sample(i, len(data))['data']:
                            mismatches.append(i)
                if log is not None:
                    log.write(json.dumps({'epoch': epoch, 'step': step, 'ids': ids, 'state': loader.state_dict()})
                              + '\n')
                    log.flush()
                if sleep:
                    time.sleep(sleep)
    except Exception as err:
        # torch's SIGCHLD handler can report a dead worker a second time, raising wherever the main thread is,
        # including here: keep every report, and always exit 3.
        errors: list[BaseException] = [err]
        while True:
            try:
                _write_error(out_path, errors, time.monotonic() - start)
                break
            except Exception as again:
                errors.append(again)
        sys.stdout.flush()
        os._exit(3)  # no barrier: the other ranks may be failing too
    with open(out_path, 'w') as handle:
        json.dump({'epochs': epochs, 'mismatches': mismatches, 'len': len(dataset)}, handle)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == '__main__':
    main()
