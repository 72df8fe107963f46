"""Launch a simulated multi-node job: one process per rank, torchrun-style environment, gloo process group."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def run_world(tmp: str, nodes: int, ranks_per_node: int, config: dict[str, Any], timeout: float = 300,
              per_node_cache: bool = True) -> list[dict[str, Any]]:
    """Run ``nodes * ranks_per_node`` rank processes; returns each rank's recorded output, in rank order.

    Each simulated node gets its own cache root (``STREAMING_CORE_CACHE_DIR``) so nodes share nothing on disk.
    """
    world = nodes * ranks_per_node
    port = free_port()
    procs = []
    outputs = []
    for rank in range(world):
        node = rank // ranks_per_node
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(ranks_per_node),
                   LOCAL_RANK=str(rank % ranks_per_node), MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port),
                   PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
        if per_node_cache:
            env['STREAMING_CORE_CACHE_DIR'] = os.path.join(tmp, f'node{node}-cache')
        node_config = json.loads(json.dumps(config))
        local = node_config['dataset'].get('local')
        if local and per_node_cache and node_config['dataset'].get('remote'):
            node_config['dataset']['local'] = f'{local}-node{node}'
        out = os.path.join(tmp, f'rank{rank}.json')
        outputs.append(out)
        procs.append(subprocess.Popen([sys.executable, '-m', 'tests.workers.rank', json.dumps(node_config), out],
                                      env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    logs = []
    for proc in procs:
        try:
            log, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise
        logs.append(log.decode(errors='replace'))
    failed = [(i, p.returncode, logs[i][-3000:]) for i, p in enumerate(procs) if p.returncode != 0]
    if failed:
        raise AssertionError(f'rank processes failed: {failed}')
    results = []
    for out in outputs:
        with open(out) as handle:
            results.append(json.load(handle))
    return results


def global_batches(results: list[dict[str, Any]], epoch: int = 0) -> list[list[int]]:
    """Interleave the ranks' batches by global batch: global batch j = every rank's batch j, in rank order."""
    per_rank = [r['epochs'][epoch] for r in results]
    count = max(len(b) for b in per_rank)
    out = []
    for j in range(count):
        merged: list[int] = []
        for batches in per_rank:
            if j < len(batches):
                merged.extend(batches[j])
        out.append(merged)
    return out


def run_two_ranks_across_a_change(tmp: Any, dataset: dict[str, Any], init: str, workers: int, context: str | None,
                                  change: Callable[[], Any] | None, first_reads: bool = True,
                                  nodes: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Ranks 0 and 1 of a gloo job (``tests.workers.version_rank``): rank 1 constructs its dataset only after rank 0
    has, and after ``change()`` (None: no change) rewrote the dataset. ``init``: the group is created ``'before'`` or
    ``'after'`` the construction; ``first_reads=False``: rank 0 does not iterate (its files were rewritten under it);
    ``nodes``: each rank's ``{'cache': cache root, 'local': ..., 'remote': ...}`` (dataset arguments of that rank), as
    ranks on two machines (default: one node's).
    Returns each rank's output: ``len``, then ``ids`` read or ``error`` (type name, message)."""
    built, go = str(tmp / 'rank0-built'), str(tmp / 'rank1-go')
    config = {'init': init, 'workers': workers, 'context': context,
              'dataset': {'batch_size': 4, 'shuffle': True, 'shuffle_seed': 7, **dataset},
              'ranks': {'0': {'built': built, 'iterate': first_reads, 'linger': str(tmp / 'rank1.json')},
                        '1': {'wait': go}}}
    port = free_port()
    procs, outs = [], []
    for rank in range(2):
        out = str(tmp / f'rank{rank}.json')
        outs.append(out)
        # A branch this test process resolved earlier (another test) is pinned in its environment for its children:
        # the ranks of a new job resolve for themselves.
        clean = {k: v for k, v in os.environ.items() if not k.startswith('STREAMING_HF_PIN_')}
        env = dict(clean, RANK=str(rank), WORLD_SIZE='2', LOCAL_WORLD_SIZE='2', LOCAL_RANK=str(rank),
                   MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
        if nodes is not None:  # one rank per node: LOCAL_WORLD_SIZE 1, the node's own cache (and directories)
            env.update(LOCAL_WORLD_SIZE='1', LOCAL_RANK='0', STREAMING_CORE_CACHE_DIR=nodes[rank]['cache'])
            config['ranks'][str(rank)]['dataset'] = {k: v for k, v in nodes[rank].items() if k != 'cache'}
        procs.append(subprocess.Popen([sys.executable, '-m', 'tests.workers.version_rank', json.dumps(config), out],
                                      env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(built):
            assert procs[0].poll() is None, procs[0].communicate()[0].decode(errors='replace')[-3000:]
            assert time.monotonic() < deadline, 'rank 0 never constructed its dataset'
            time.sleep(0.05)
        if change is not None:
            change()
        open(go, 'w').close()
        logs = [proc.communicate(timeout=240)[0].decode(errors='replace') for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    results = []
    for proc, out, log in zip(procs, outs, logs):
        assert proc.returncode == 0, log[-3000:]
        with open(out) as handle:
            results.append(json.load(handle))
    return results
