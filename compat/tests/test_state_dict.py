"""State-dict compatibility: a mid-epoch ``state_dict`` of either implementation resumes in the other.

For each case of ``cases.STATE_CASES`` (one rank; a ``StreamingDataLoader`` with ``num_workers=0`` or, in some
cases, real worker processes):

1. the reference runs to the checkpoint (whole epochs, then some batches), takes ``loader.state_dict()``, and a new
   reference dataset/loader loads it and iterates the rest of that epoch and the next one;
2. ours does the same up to the checkpoint: the batches consumed and the state dict must equal the reference's;
3. ours loads the reference's state and must yield exactly the reference's remaining samples (and next epoch);
4. ours loads its own state: the same;
5. the reference loads our state (a second subprocess run): the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from compat.tests import ours
from compat.tests.cases import STATE_CASES

pytestmark = pytest.mark.compat
IDS = [c['id'] for c in STATE_CASES]
CASES = {c['id']: c for c in STATE_CASES}


@pytest.fixture(scope='module')
def ref_states(run_ref: Any, order_data: str) -> dict[str, Any]:
    """The reference's checkpoint, state and resumed samples for every case."""
    return run_ref('state.py', {'data': order_data, 'cases': STATE_CASES})


@pytest.fixture(scope='module')
def our_states(order_data: str) -> dict[str, Any]:
    """Our checkpoint and state for every case (an exception is kept and raised by the tests that need it)."""
    out: dict[str, Any] = {}
    for case in STATE_CASES:
        try:
            out[case['id']] = ours.checkpoint(order_data, case)
        except Exception as err:  # re-raised per test below
            out[case['id']] = err
    return out


@pytest.fixture(scope='module')
def ref_from_ours(run_ref: Any, order_data: str, our_states: dict[str, Any]) -> dict[str, Any]:
    """The reference resuming from each of our state dicts."""
    cases = [dict(CASES[name], state=result['state']) for name, result in our_states.items()
             if not isinstance(result, Exception)]
    if not cases:
        return {}
    return run_ref('state.py', {'data': order_data, 'cases': cases})


def _ours(our_states: dict[str, Any], name: str) -> dict[str, Any]:
    result = our_states[name]
    if isinstance(result, Exception):
        raise result
    return result


def _ref(ref_states: dict[str, Any], name: str) -> dict[str, Any]:
    result = ref_states[name]
    assert 'error' not in result, f'the reference failed on {name}: {result["error"]}\n{result.get("traceback")}'
    return result


@pytest.mark.parametrize('name', IDS)
def test_checkpoint_and_state_equal_reference(name: str, ref_states: dict[str, Any],
                                              our_states: dict[str, Any]) -> None:
    """Same batches before the checkpoint, same state dict (every reference key)."""
    ref, mine = _ref(ref_states, name), _ours(our_states, name)
    assert mine['first'] == ref['first'], f'{name}: samples before the checkpoint differ'
    for key, value in ref['state'].items():
        assert key in mine['state'], f'{name}: our state dict lacks {key!r}'
        assert mine['state'][key] == value, f'{name}: state[{key!r}] is {mine["state"][key]!r}, reference {value!r}'


@pytest.mark.parametrize('name', IDS)
def test_ours_resumes_reference_state(name: str, ref_states: dict[str, Any], order_data: str) -> None:
    """Ours, loading the reference's state, yields the reference's remaining samples."""
    ref = _ref(ref_states, name)
    got = ours.resume(order_data, CASES[name], ref['state'])
    assert got['rest'] == ref['rest'], f'{name}: remaining samples after loading the reference state differ'
    assert got['next'] == ref['next'], f'{name}: the epoch after the resumed one differs'


@pytest.mark.parametrize('name', IDS)
def test_ours_resumes_own_state(name: str, ref_states: dict[str, Any], our_states: dict[str, Any],
                                order_data: str) -> None:
    """Ours, loading its own state, yields the reference's remaining samples."""
    ref, mine = _ref(ref_states, name), _ours(our_states, name)
    got = ours.resume(order_data, CASES[name], mine['state'])
    assert got['rest'] == ref['rest'], f'{name}: remaining samples after loading our own state differ'
    assert got['next'] == ref['next'], f'{name}: the epoch after the resumed one differs'


@pytest.mark.parametrize('name', IDS)
def test_reference_resumes_our_state(name: str, ref_states: dict[str, Any], our_states: dict[str, Any],
                                     ref_from_ours: dict[str, Any]) -> None:
    """The reference, loading our state, yields its own remaining samples."""
    ref = _ref(ref_states, name)
    _ours(our_states, name)
    theirs = _ref(ref_from_ours, name)
    assert theirs['rest'] == ref['rest'], f'{name}: the reference resuming from our state yields other samples'
    assert theirs['next'] == ref['next'], f'{name}: the reference resuming from our state: next epoch differs'
