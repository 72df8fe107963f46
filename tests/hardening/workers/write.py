"""A writer process for the writer kill tests.

Usage: python -m tests.hardening.workers.write CONFIG_JSON RESULT_JSON

CONFIG keys: ``kind`` (``mds``, ``json``, ``csv``... as in :mod:`tests.hardening.hostile`), ``out`` (a directory,
a URL, or a ``[local, remote]`` pair), ``count``, ``start`` (first id), ``writer`` (extra writer keyword arguments:
``size_limit``, ``compression``, ``hashes``, ``exist_ok``, ``storage_options``, ``keep_local``...), ``progress`` (a
file that gets one line per sample written, flushed), ``sleep`` (seconds after each sample).

RESULT: ``{"done": true}`` after the writer committed, or ``{"error": {"type", "mro", "message"}}`` and exit
status 3 when it raised.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    config = json.loads(sys.argv[1])
    result = sys.argv[2]
    from tests.hardening.hostile import columns_of, mds_sample, text_sample
    kind = config.get('kind', 'mds')
    out = config['out'] if isinstance(config['out'], str) else tuple(config['out'])
    options = dict(config.get('writer', {}))
    progress = open(config['progress'], 'a') if config.get('progress') else None
    sleep = float(config.get('sleep', 0.0))
    start = int(config.get('start', 0))
    try:
        if kind == 'mds':
            from streaming_mds import MDSWriter
            writer = MDSWriter(out=out, columns=columns_of(kind), **options)
            make = mds_sample
        elif kind == 'json':
            from streaming_jsonl import JSONWriter
            writer = JSONWriter(out=out, columns=columns_of(kind), **options)
            make = text_sample
        else:
            from streaming_csv import CSVWriter
            writer = CSVWriter(out=out, columns=columns_of(kind), **options)
            make = text_sample
        with writer:
            for i in range(start, start + int(config['count'])):
                writer.write(make(i))
                if progress is not None:
                    progress.write(f'{i}\n')
                    progress.flush()
                if sleep:
                    time.sleep(sleep)
    except Exception as err:
        with open(result, 'w') as handle:
            json.dump({'error': {'type': type(err).__name__, 'mro': [c.__name__ for c in type(err).__mro__],
                                 'message': str(err)}}, handle)
        os._exit(3)
    with open(result, 'w') as handle:
        json.dump({'done': True}, handle)


if __name__ == '__main__':
    main()
