"""Sample orders and per-rank plans of the reference (run with the reference venv's python).

Usage: ``orders.py REQUEST.json RESULT.json``. The request is ``{'data': DIR, 'cases': [...]}``; each case is a
dataset description (see :func:`compat.ref.common.make_dataset`) plus:

* ``mode='iter'``: iterate the dataset in this process (``num_workers=0``) for ``epochs`` epochs; the result is
  ``{'epochs': [[id, ...], ...]}`` (the ``id`` column of each yielded sample);
* ``mode='plan'``: for a hand-built ``World(num_nodes, ranks_per_node, workers_per_rank, 0)`` (``world``) and each
  ``(epoch, sample_in_epoch)`` of ``at``, the whole world's plan from
  ``streaming.base.batching.generate_work``; the result is ``{'plans': [{'shape': [...], 'ids': [...]}, ...]}``.
  ``num_canonical_nodes`` and ``shuffle_block_size`` left unset get the reference's lazy defaults for that world,
  as its first ``__iter__`` would set them.

A case that raises gives ``{'error': 'Type: message'}`` instead.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from compat.ref.common import dump_result, fresh, load_request, make_dataset, run_isolated  # noqa: E402


def iterate(data: str, case: dict[str, Any]) -> dict[str, Any]:
    """Iterate ``case['epochs']`` epochs in this process and return the ``id`` of every sample."""
    dataset = make_dataset(data, case)
    epochs = [[int(sample['id']) for sample in dataset] for _ in range(case.get('epochs', 1))]
    del dataset
    return {'epochs': epochs}


def plans(data: str, case: dict[str, Any]) -> dict[str, Any]:
    """The reference ``generate_work`` plans of ``case['world']`` at each ``case['at']`` position."""
    from streaming.base.batching import generate_work
    from streaming.base.world import World
    dataset = make_dataset(data, case)
    num_nodes, ranks_per_node, workers_per_rank = case['world']
    world = World(num_nodes, ranks_per_node, workers_per_rank, 0)
    if not dataset.num_canonical_nodes:
        dataset.num_canonical_nodes = 64 * num_nodes if dataset.shuffle_algo in ('py1s', 'py2s') else num_nodes
    dataset._set_shuffle_block_size(world)
    out = []
    for epoch, sample_in_epoch in case.get('at', [[0, 0]]):
        plan = generate_work(dataset.batching_method, dataset, world, epoch, sample_in_epoch)
        out.append({'shape': list(plan.shape), 'ids': [int(x) for x in plan.flatten()]})
    del dataset
    return {'plans': out}


def main() -> int:
    """Run every case of the request."""
    request, result_path = load_request()
    results = {}
    for case in request['cases']:
        fn = iterate if case['mode'] == 'iter' else plans
        results[case['id']] = run_isolated(fn, request['data'], case)
    fresh()
    dump_result(results, result_path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
