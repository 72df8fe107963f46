"""Switch mid-run: a training script written for mosaicml-streaming starts in the reference's virtualenv, saves a
checkpoint mid-epoch, and resumes -- the same script, unmodified -- under streaming-compat (``import streaming``
from ours), in fresh processes as a user would. The resumed run reads exactly the samples the reference would have
read next, and the reference resumes a checkpoint ours wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
REF_PYTHON = os.environ.get('STREAMING_REF_PYTHON') or os.path.join(ROOT, '.venv-ref', 'bin', 'python')

# The user's script: nothing in it knows which package it runs on.
SCRIPT = textwrap.dedent('''
    import json, sys, warnings
    warnings.simplefilter('ignore')
    from streaming import MDSWriter, StreamingDataLoader, StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    mode, data, local, state_file = sys.argv[1:5]
    if mode == 'write':
        with MDSWriter(out=data, columns={'id': 'int', 'pad': 'bytes'}, size_limit=600) as writer:
            for i in range(150):
                writer.write({'id': i, 'pad': bytes(i % 7)})
        sys.exit(0)
    clean_stale_shared_memory()
    dataset = StreamingDataset(remote=data, local=local, batch_size=5, shuffle=True, shuffle_seed=1234,
                               num_canonical_nodes=2, shuffle_block_size=40)
    loader = StreamingDataLoader(dataset, batch_size=5, num_workers=int(sys.argv[5]))
    out = {}
    if mode == 'start':
        seen = []
        for k, batch in enumerate(loader):
            seen += [int(x) for x in batch['id']]
            if k == 6:
                out['state'] = loader.state_dict()
                out['first'] = list(seen)
        out['rest'] = seen[len(out['first']):]
        out['next_epoch'] = [int(x) for batch in loader for x in batch['id']]
    elif mode == 'end':  # the state after the last batch of an epoch
        out['epoch0'] = [int(x) for batch in loader for x in batch['id']]
        out['state'] = loader.state_dict()
        out['epoch1'] = [int(x) for batch in loader for x in batch['id']]
    else:
        with open(state_file) as handle:
            loader.load_state_dict(json.load(handle))
        out['rest'] = [int(x) for batch in loader for x in batch['id']]
        out['next_epoch'] = [int(x) for batch in loader for x in batch['id']]
    print('@@' + json.dumps(out))
''')


def _run(python: str, args: list[str], tmp: Any, guard: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV')}
    env['TMPDIR'] = str(tmp / 'tmp')  # the reference leaves lock files in the temporary directory
    os.makedirs(env['TMPDIR'], exist_ok=True)
    if guard:  # the reference side must really be mosaicml-streaming
        prefix = 'from compat.reference_guard import assert_reference_streaming\nassert_reference_streaming()\n'
    else:  # and our side really streaming-compat
        prefix = 'import streaming\nassert streaming.ENGINE == "streaming-core"\n'
    proc = subprocess.run([python, '-c', prefix + SCRIPT, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, f'{python} {args[0]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}'
    lines = [line for line in proc.stdout.splitlines() if line.startswith('@@')]
    return json.loads(lines[-1][2:]) if lines else {}


@pytest.fixture(scope='module')
def ref_python() -> str:
    if not os.path.exists(REF_PYTHON):
        message = f'the reference virtualenv is missing ({REF_PYTHON}); run compat/setup.sh'
        if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
            pytest.fail(message)
        pytest.skip(message)
    return REF_PYTHON


@pytest.mark.slow
@pytest.mark.compat
@pytest.mark.parametrize('workers', [0, 2])
def test_resume_a_reference_run_under_import_streaming(ref_python: str, tmp_path: Any, workers: int) -> None:
    data = str(tmp_path / 'data')
    _run(ref_python, ['write', data, '-', '-', '0'], tmp_path, guard=True)
    started = _run(ref_python, ['start', data, str(tmp_path / 'ref-local'), '-', str(workers)], tmp_path, guard=True)
    assert len(started['first']) == 35 and len(started['first']) + len(started['rest']) == 150
    state_file = tmp_path / 'state.json'
    state_file.write_text(json.dumps(started['state']))
    resumed = _run(sys.executable, ['resume', data, str(tmp_path / 'our-local'), str(state_file), str(workers)],
                   tmp_path, guard=False)
    assert resumed['rest'] == started['rest']
    assert resumed['next_epoch'] == started['next_epoch']


@pytest.mark.slow
@pytest.mark.compat
def test_the_reference_resumes_a_run_started_on_ours(ref_python: str, tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    _run(sys.executable, ['write', data, '-', '-', '0'], tmp_path, guard=False)  # our writer, the same bytes
    started = _run(sys.executable, ['start', data, str(tmp_path / 'our-local'), '-', '0'], tmp_path, guard=False)
    state_file = tmp_path / 'state.json'
    state_file.write_text(json.dumps(started['state']))
    resumed = _run(ref_python, ['resume', data, str(tmp_path / 'ref-local'), str(state_file), '0'], tmp_path,
                   guard=True)
    assert resumed['rest'] == started['rest']
    assert resumed['next_epoch'] == started['next_epoch']



@pytest.mark.slow
@pytest.mark.compat
def test_reference_states_at_and_past_the_end_of_an_epoch(ref_python: str, tmp_path: Any) -> None:
    """docs/migrating.md: the reference's state after the last batch of epoch 0 says (0, every sample); loading it,
    the reference's first loop yields nothing and epoch 1 comes with the next; ours starts epoch 1 at once. A state
    past the epoch (300 samples into an epoch of 150: saved for another dataset) the reference refuses; ours ends
    the epoch (with a warning)."""
    data = str(tmp_path / 'data')
    _run(ref_python, ['write', data, '-', '-', '0'], tmp_path, guard=True)
    ended = _run(ref_python, ['end', data, str(tmp_path / 'ref-local'), '-', '0'], tmp_path, guard=True)
    assert sorted(ended['epoch0']) == list(range(150)) and sorted(ended['epoch1']) == list(range(150))
    assert ended['epoch0'] != ended['epoch1']
    assert (ended['state']['epoch'], ended['state']['sample_in_epoch']) == (0, 150)
    state_file = tmp_path / 'state.json'
    state_file.write_text(json.dumps(ended['state']))
    reference = _run(ref_python, ['resume', data, str(tmp_path / 'ref-local-2'), str(state_file), '0'], tmp_path,
                     guard=True)
    assert reference['rest'] == [] and reference['next_epoch'] == ended['epoch1']
    ours = _run(sys.executable, ['resume', data, str(tmp_path / 'our-local'), str(state_file), '0'], tmp_path,
                guard=False)
    assert ours['rest'] == ended['epoch1']

    past = tmp_path / 'past.json'
    past.write_text(json.dumps(dict(ended['state'], sample_in_epoch=300)))
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV')}
    env['TMPDIR'] = str(tmp_path / 'tmp')
    refused = subprocess.run([ref_python, '-c', SCRIPT, 'resume', data, str(tmp_path / 'ref-local-3'), str(past),
                              '0'], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert refused.returncode != 0 and 'ValueError' in refused.stderr
    ours = _run(sys.executable, ['resume', data, str(tmp_path / 'our-local-2'), str(past), '0'], tmp_path,
                guard=False)
    assert ours['rest'] == ended['epoch1']
