"""Write the datasets the order and state-dict checks read (run with the reference venv's python).

Usage: ``make_order_data.py OUT_DIR``. Writes, with the reference ``MDSWriter``, uncompressed MDS datasets whose
shards have uneven sample counts: ``A`` (137 samples, ids 0..136), ``B`` (61 samples, ids 1000..1060) and ``C``
(23 samples, ids 2000..2022). Each sample is ``{'id': int, 'txt': str}``; ``txt`` has a random length so shard
sizes vary. Deterministic (fixed seeds).
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from compat.ref.common import writer_class  # noqa: E402
from compat.tests.cases import LAYOUT  # noqa: E402


def main() -> int:
    """Write every dataset of :data:`LAYOUT` under ``argv[1]`` and print the shard sizes as JSON."""
    import numpy as np
    out = sys.argv[1]
    writer = writer_class('MDSWriter')
    shards = {}
    for name, (first, count, size_limit, seed) in LAYOUT.items():
        rng = np.random.default_rng(seed)
        path = os.path.join(out, name)
        with writer(out=path, columns={'id': 'int', 'txt': 'str'}, size_limit=size_limit) as handle:
            for k in range(count):
                handle.write({'id': first + k, 'txt': 'x' * int(rng.integers(0, 60))})
        with open(os.path.join(path, 'index.json')) as handle:
            shards[name] = [s['samples'] for s in json.load(handle)['shards']]
    print(json.dumps(shards))
    return 0


if __name__ == '__main__':
    sys.exit(main())
