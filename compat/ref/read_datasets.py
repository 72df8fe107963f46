"""Read datasets with the reference (run with the reference venv's python).

Usage: ``read_datasets.py REQUEST.json RESULT.json``. The request is ``{'datasets': {name: path or {'path': path,
'validate_hash': algo}}}`` (the second form reads the dataset as a remote, checking that hash); the result is
``{name: {'getitem': [...], 'iter': [...], 'readers': [...]}}`` of :mod:`compat.tagged` forms: the reference
``StreamingDataset``'s random access and iteration, and its shard readers used directly. A dataset the reference
fails on gives ``{'error': 'Type: message'}``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from compat.ref.common import (  # noqa: E402
    dump_result,
    fresh,
    load_request,
    read_with_dataset,
    read_with_readers,
    run_isolated,
)


def read_one(spec: str | dict) -> dict:
    """The reference's random access, iteration and shard-reader views of one dataset.

    ``spec`` is a path, or ``{'path': ..., 'validate_hash': algo}`` to read it as a remote with hash validation.
    """
    if isinstance(spec, str):
        spec = {'path': spec}
    result = read_with_dataset(spec['path'], validate_hash=spec.get('validate_hash'))
    result['readers'] = read_with_readers(spec['path'])
    return result


def main() -> int:
    """Read every dataset of the request."""
    request, result_path = load_request()
    results = {}
    for name, spec in request['datasets'].items():
        results[name] = run_isolated(read_one, spec)
    fresh()
    dump_result(results, result_path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
