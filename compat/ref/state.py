"""Mid-epoch ``state_dict`` / ``load_state_dict`` of the reference (run with the reference venv's python).

Usage: ``state.py REQUEST.json RESULT.json``. The request is ``{'data': DIR, 'cases': [...]}``; each case is a
dataset description (see :func:`compat.ref.common.make_dataset`) iterated through a ``StreamingDataLoader``
(``batch_size`` = the dataset's, ``num_workers`` = the case's, default 0) plus either:

* ``full_epochs`` and ``batches``: iterate ``full_epochs`` whole epochs, then ``batches`` batches of the next,
  and take ``loader.state_dict()``. Then a new dataset and loader load that state and iterate to the end of the
  epoch, and one more epoch. Result: ``{'first': [...], 'state': {...}, 'rest': [...], 'next': [...]}``, where
  ``first`` holds the ids of the partial epoch's batches;
* ``state``: a state dict (written by the other implementation) to load into a new dataset and loader. Result:
  ``{'rest': [...], 'next': [...]}``.

Ids are the ``id`` column of the samples, in order. A case that raises gives ``{'error': 'Type: message'}``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from compat.ref.common import dump_result, fresh, load_request, make_dataset, run_isolated  # noqa: E402


def _ids(batch: Any) -> list[int]:
    return [int(x) for x in batch['id']]


def _loader(data: str, case: dict[str, Any]) -> Any:
    from streaming import StreamingDataLoader
    dataset = make_dataset(data, case)
    return StreamingDataLoader(dataset, batch_size=case['kwargs']['batch_size'],
                               num_workers=case.get('num_workers', 0))


def resume(data: str, case: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """Load ``state`` into a fresh dataset/loader; the rest of that epoch and the whole next one."""
    loader = _loader(data, case)
    loader.load_state_dict(state)
    rest = [i for batch in loader for i in _ids(batch)]
    following = [i for batch in loader for i in _ids(batch)]
    del loader
    return {'rest': rest, 'next': following}


def checkpoint(data: str, case: dict[str, Any]) -> dict[str, Any]:
    """Run to the checkpoint, take the state, and resume from it in a new dataset."""
    loader = _loader(data, case)
    for _ in range(case.get('full_epochs', 0)):
        for _batch in loader:
            pass
    first = []
    if case['batches']:
        for k, batch in enumerate(loader):
            first.extend(_ids(batch))
            if k + 1 == case['batches']:
                break
    state = loader.state_dict()
    del loader
    return {'first': first, 'state': state, **resume(data, case, state)}


def main() -> int:
    """Run every case of the request."""
    request, result_path = load_request()
    results = {}
    for case in request['cases']:
        if 'state' in case:
            results[case['id']] = run_isolated(resume, request['data'], case, case['state'])
        else:
            results[case['id']] = run_isolated(checkpoint, request['data'], case)
    fresh()
    dump_result(results, result_path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
