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
from compat.tests.cases import ITER_CASES, PLAN_CASES, sample_ids

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


#: Plan cases whose ranks are also iterated one by one (small worlds keep the run short).
RANK_CASES = [c for c in PLAN_CASES if c['world'][0] * c['world'][1] <= 4 and c['at'][0] == [0, 0]]


@pytest.mark.parametrize('case', RANK_CASES, ids=[c['id'] for c in RANK_CASES])
def test_each_rank_iterates_reference_plan(case: dict[str, Any], ref_orders: dict[str, Any],
                                           order_data: str) -> None:
    """Each rank of the world, iterated by ours in one process with ``world=``, reads exactly what the reference
    plan gives that rank (its workers' batches interleaved as a DataLoader reads them, padding skipped).
    """
    ref = ref_orders[case['id']]
    if 'error' in ref:
        ours.assert_same_error(ref, ours.rank_iterate, order_data, case, 0)
        return
    ids = sample_ids(case)
    num_nodes, ranks_per_node, _ = case['world']
    for rank in range(num_nodes * ranks_per_node):
        expected = ours.rank_sequence(ref['plans'][0], rank, ids)
        got = ours.rank_iterate(order_data, case, rank)
        assert got == expected, f'{case["id"]} rank {rank}: {_first_mismatch(got, expected)}'


def _resume_point(case: dict[str, Any]) -> int | None:
    """Index in ``case['at']`` of the first mid-epoch-0 position, when the case fixes the canonical nodes."""
    if 'num_canonical_nodes' not in case['kwargs']:
        return None
    return next((k for k, (epoch, sample) in enumerate(case['at']) if epoch == 0 and sample > 0), None)


RESUME_CASES = [c for c in RANK_CASES if _resume_point(c) is not None]


@pytest.mark.parametrize('case', RESUME_CASES, ids=[c['id'] for c in RESUME_CASES])
def test_each_rank_resumes_reference_plan(case: dict[str, Any], ref_orders: dict[str, Any],
                                          order_data: str) -> None:
    """Each rank, loading a mid-epoch state dict (``sample_in_epoch`` > 0) and iterating with ``world=``, reads
    exactly the reference plan at that ``sample_in_epoch`` for that rank.
    """
    ref = ref_orders[case['id']]
    if 'error' in ref:
        ours.assert_same_error(ref, ours.rank_iterate, order_data, case, 0)
        return
    k = _resume_point(case)
    epoch, sample_in_epoch = case['at'][k]
    num_nodes, ranks_per_node, _ = case['world']
    state = {'epoch': epoch, 'sample_in_epoch': sample_in_epoch,
             'num_canonical_nodes': case['kwargs']['num_canonical_nodes'],
             'shuffle_seed': case['kwargs'].get('shuffle_seed', 9176), 'initial_physical_nodes': num_nodes}
    ids = sample_ids(case)
    for rank in range(num_nodes * ranks_per_node):
        expected = ours.rank_sequence(ref['plans'][k], rank, ids)
        got = ours.rank_iterate(order_data, case, rank, state=state)
        assert got == expected, f'{case["id"]} rank {rank} from sample {sample_in_epoch}: ' \
                                f'{_first_mismatch(got, expected)}'


def test_reference_cases_ran(ref_orders: dict[str, Any]) -> None:
    """Guard the harness: nearly every case produced a real result on the reference side."""
    errors = {k: v['error'] for k, v in ref_orders.items() if 'error' in v}
    expected_errors = {'plan-incompatible-ncn-orig', 'plan-stratified-batch-too-small',
                       'plan-device-per-stream-ncn-mismatch'}
    assert set(errors) <= expected_errors, f'unexpected reference errors: {errors}'
