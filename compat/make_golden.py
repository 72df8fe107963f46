"""Write the golden datasets with the reference and record what they decode to.

Run with the reference virtualenv's python (``compat/setup.sh`` builds it)::

    .venv-ref/bin/python compat/make_golden.py [--out tests/fixtures/golden]

For every definition of :mod:`compat.golden_inputs` this writes ``<out>/<name>/`` with the reference's own writer
(or, for ``merged``, several partitions and the reference's ``merge_index``), reads it back with the reference's
``StreamingDataset`` (random access and iteration) and its shard readers, checks the three agree, and writes
``<out>/manifest.json``: per dataset the writer, its keyword arguments, the inputs and the expected decoded
samples, all as :mod:`compat.tagged` forms, plus the list of files. Writers are fed ``decode(encode(inputs))``,
exactly what our side feeds its own writers, so both sides write the same values.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compat.golden_inputs import definitions  # noqa: E402
from compat.ref.common import (  # noqa: E402
    ROOT,
    fresh,
    read_with_dataset,
    read_with_readers,
    tagged,
    versions,
    writer_class,
)

DEFAULT_OUT = os.path.join(ROOT, 'tests', 'fixtures', 'golden')
MAX_TOTAL_BYTES = 2 * 1024 * 1024


def write_one(writer: str, kwargs: dict, inputs: list, out: str) -> None:
    """Write ``inputs`` into the empty directory ``out`` with the reference writer ``writer``."""
    cls = writer_class(writer)
    with cls(out=out, **kwargs) as handle:
        for sample in inputs:
            handle.write(sample)


def list_files(root: str) -> list[list]:
    """``[[relative path, size], ...]`` of every file under ``root``, sorted."""
    rows = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            rows.append([os.path.relpath(path, root).replace(os.sep, '/'), os.path.getsize(path)])
    return sorted(rows)


def build(definition: dict, out_root: str) -> dict:
    """Write one golden dataset and return its manifest entry."""
    from streaming.base.util import merge_index
    name = definition['name']
    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    entry = {'name': name, 'writer': definition['writer']}
    if definition['writer'] == 'merge_index':
        partitions = []
        os.makedirs(out)
        for part in definition['partitions']:
            encoded = [tagged.encode(s) for s in part['inputs']]
            write_one(part['writer'], part['kwargs'], tagged.decode(encoded), os.path.join(out, part['dir']))
            partitions.append({'dir': part['dir'], 'writer': part['writer'], 'kwargs': part['kwargs'],
                               'inputs': encoded})
        merge_index(out, keep_local=True)
        entry['partitions'] = partitions
    else:
        encoded = [tagged.encode(s) for s in definition['inputs']]
        write_one(definition['writer'], definition['kwargs'], tagged.decode(encoded), out)
        entry['kwargs'] = definition['kwargs']
        entry['inputs'] = encoded
    read = read_with_dataset(out)
    by_reader = read_with_readers(out)
    if read['getitem'] != read['iter'] or read['getitem'] != by_reader:
        raise SystemExit(f'{name}: the reference disagrees with itself (getitem / iteration / readers)')
    entry['expected'] = read['getitem']
    entry['files'] = list_files(out)
    with open(os.path.join(out, 'index.json')) as handle:
        entry['shards'] = len(json.load(handle)['shards'])
    return entry


def main() -> int:
    """Build every golden dataset and the manifest."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', default=DEFAULT_OUT)
    parser.add_argument('--only', nargs='*', help='rebuild only these datasets (the manifest keeps the others)')
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    manifest_path = os.path.join(args.out, 'manifest.json')
    old = {}
    if args.only and os.path.exists(manifest_path):
        with open(manifest_path) as handle:
            old = {d['name']: d for d in json.load(handle)['datasets']}
    datasets = []
    for definition in definitions():
        if args.only and definition['name'] not in args.only and definition['name'] in old:
            datasets.append(old[definition['name']])
            continue
        print(f'writing {definition["name"]}', file=sys.stderr)
        datasets.append(build(definition, args.out))
    fresh()
    manifest = {
        'about': 'Golden datasets written by mosaicml-streaming (the reference) with compat/make_golden.py. '
                 'Values are compat.tagged forms; "inputs" were given to the writer, "expected" is what the '
                 'reference StreamingDataset decodes, in order.',
        'reference': versions(),
        'datasets': datasets,
    }
    with open(manifest_path, 'w') as handle:
        json.dump(manifest, handle, indent=1, allow_nan=False)  # key order matters (dict inputs)
        handle.write('\n')
    total = sum(size for d in datasets for _, size in d['files']) + os.path.getsize(manifest_path)
    print(f'{len(datasets)} datasets, {total} bytes in all', file=sys.stderr)
    if total > MAX_TOTAL_BYTES:
        raise SystemExit(f'golden data is {total} bytes, over the {MAX_TOTAL_BYTES} budget: make it smaller')
    return 0


if __name__ == '__main__':
    sys.exit(main())
