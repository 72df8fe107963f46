"""Order compatibility: the samples each rank receives, in order, equal mosaicml-streaming 0.13's.

(a) Single-process iteration (``num_workers=0``) of the reference ``StreamingDataset`` against ours with the same
keyword arguments, over several epochs. (b) Whole-world plans: the reference's
``streaming.base.batching.generate_work`` with a hand-built ``World(num_nodes, ranks_per_node, workers_per_rank,
0)`` against our ``StreamingDataset.get_plan(World(...), epoch, sample_in_epoch)``: the full ``(nodes, ranks,
workers, batches, batch_size)`` arrays of sample ids, ``-1`` padding included. The cases (``cases.py``) cover every
shuffle algorithm, both partition algorithms, canonical node counts, batch sizes, stream weights, epoch sizes,
sampling methods and batching methods. All reference results come from one subprocess run in ``.venv-ref``.
"""

from __future__ import annotations

from typing import Any

import pytest

from compat.tests import ours
from compat.tests.cases import ITER_CASES, PLAN_CASES

pytestmark = pytest.mark.compat


@pytest.fixture(scope='module')
def ref_orders(run_ref: Any, order_data: str) -> dict[str, Any]:
    """The reference's result for every iteration and plan case."""
    return run_ref('orders.py', {'data': order_data, 'cases': ITER_CASES + PLAN_CASES})


def _first_mismatch(ours_seq: list[int], ref_seq: list[int]) -> str:
    for i, (a, b) in enumerate(zip(ours_seq, ref_seq, strict=False)):
        if a != b:
            return f'first difference at position {i}: ours {ours_seq[i:i + 8]} vs reference {ref_seq[i:i + 8]}'
    return f'lengths differ: ours {len(ours_seq)} vs reference {len(ref_seq)}'


@pytest.mark.parametrize('case', ITER_CASES, ids=[c['id'] for c in ITER_CASES])
def test_single_process_iteration_matches_reference(case: dict[str, Any], ref_orders: dict[str, Any],
                                                    order_data: str) -> None:
    """Every epoch's sample ids, in order, equal the reference's."""
    ref = ref_orders[case['id']]
    if 'error' in ref:
        ours.assert_same_error(ref, ours.iterate, order_data, case)
        return
    got = ours.iterate(order_data, case)['epochs']
    for epoch, (mine, theirs) in enumerate(zip(got, ref['epochs'], strict=True)):
        assert mine == theirs, f'{case["id"]} epoch {epoch}: {_first_mismatch(mine, theirs)}'


@pytest.mark.parametrize('case', PLAN_CASES, ids=[c['id'] for c in PLAN_CASES])
def test_world_plan_matches_reference(case: dict[str, Any], ref_orders: dict[str, Any], order_data: str) -> None:
    """The whole world's plan at each (epoch, sample_in_epoch) equals the reference's generate_work."""
    ref = ref_orders[case['id']]
    if 'error' in ref:
        ours.assert_same_error(ref, ours.plans, order_data, case)
        return
    got = ours.plans(order_data, case)['plans']
    for (epoch, sample_in_epoch), mine, theirs in zip(case['at'], got, ref['plans'], strict=True):
        where = f'{case["id"]} world={case["world"]} epoch={epoch} sample_in_epoch={sample_in_epoch}'
        assert mine['shape'] == theirs['shape'], f'{where}: plan shape {mine["shape"]} vs {theirs["shape"]}'
        assert mine['ids'] == theirs['ids'], f'{where}: {_first_mismatch(mine["ids"], theirs["ids"])}'


def test_reference_cases_ran(ref_orders: dict[str, Any]) -> None:
    """Guard the harness: nearly every case produced a real result on the reference side."""
    errors = {k: v['error'] for k, v in ref_orders.items() if 'error' in v}
    expected_errors = {'plan-incompatible-ncn-orig', 'plan-stratified-batch-too-small',
                       'plan-device-per-stream-ncn-mismatch'}
    assert set(errors) <= expected_errors, f'unexpected reference errors: {errors}'
