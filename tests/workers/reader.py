"""A training-loop stand-in for crash tests: iterate, and after every batch atomically record (ids, state).

Usage: python -m tests.workers.reader CONFIG_JSON PROGRESS_JSON
The progress file holds {"ids": [...consumed ids...], "state": loader.state_dict(), "done": bool}; it is replaced
atomically after each batch, so a SIGKILL at any moment leaves ids and state consistent with each other.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    config = json.loads(sys.argv[1])
    progress = sys.argv[2]
    from streaming_core import StreamingDataLoader, StreamingDataset
    ids: list[int] = []
    state = None
    if os.path.exists(progress):
        with open(progress) as handle:
            saved = json.load(handle)
        ids, state = saved['ids'], saved['state']
    dataset = StreamingDataset(**config['dataset'])
    loader = StreamingDataLoader(dataset, batch_size=config['dataset']['batch_size'],
                                 num_workers=config.get('workers', 0))
    if state is not None:
        loader.load_state_dict(state)
    for batch in loader:
        ids.extend(batch['id'].tolist())
        record = {'ids': ids, 'state': loader.state_dict(), 'done': False}
        with open(progress + '.tmp', 'w') as handle:
            json.dump(record, handle)
        os.replace(progress + '.tmp', progress)
        time.sleep(config.get('sleep', 0.0))
    with open(progress + '.tmp', 'w') as handle:
        json.dump({'ids': ids, 'state': loader.state_dict(), 'done': True}, handle)
    os.replace(progress + '.tmp', progress)


if __name__ == '__main__':
    main()
