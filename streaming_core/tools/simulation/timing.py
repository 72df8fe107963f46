"""Time model: per-node download queues at a fixed bandwidth, and steps taken in lockstep by every device.

* Step ``s`` needs the shards of its samples on every node. A shard downloaded for step ``s`` is requested
  ``lookahead`` steps earlier (the workers' ``predownload``), at the moment that earlier step starts; with no
  lookahead, when the previous step's compute ends.
* Each node downloads one file at a time, in request order, at ``bandwidth`` bytes/s.
* A step starts when the previous step's compute is over (``batch_size * time_per_sample`` seconds) and every shard
  it needs on every node has arrived: the slowest node sets the pace, as a synchronous data-parallel job does.

Only steps that need a download are visited (between them steps follow each other at compute pace), so the cost is
proportional to the number of downloads, not of steps.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streaming_core.tools.simulation.cache import NodeDownloads

__all__ = ['Timeline', 'simulate_time']


@dataclass
class Timeline:
    """When things happened.

    Attributes:
        startup_seconds: Time before the first step can start (its shards downloaded).
        first_batch_seconds: Time until the first batch is done.
        total_seconds: Time of the whole run.
        stalled_steps: Steps after the first that started late because a shard had not arrived.
        stall_seconds: Time those steps lost waiting for downloads (the startup not included).
        busy_seconds: Per node, time spent downloading.
        event_steps: Steps that needed a download (for plots), with ``event_start`` their start times.
        event_start: The start time of each of those steps.
    """

    startup_seconds: float
    first_batch_seconds: float
    total_seconds: float
    stalled_steps: int
    stall_seconds: float
    busy_seconds: list[float]
    event_steps: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    event_start: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))


def simulate_time(downloads: Sequence[NodeDownloads], sizes: NDArray[np.int64], total_steps: int,
                  step_seconds: float, lookahead: int, bandwidth: float) -> Timeline:
    """Run the time model over every node's downloads (see the module docstring).

    Args:
        downloads: Per node, the downloads in order of need.
        sizes: Bytes downloaded per shard.
        total_steps: Steps in the run.
        step_seconds: Compute time per step.
        lookahead: Steps ahead of need that a download is requested.
        bandwidth: Bytes per second per node.
    """
    c = float(step_seconds)
    nodes = len(downloads)
    need = np.concatenate([d.steps for d in downloads]) if nodes else np.zeros(0, np.int64)
    node_of = np.concatenate([np.full(d.count, n, np.int64) for n, d in enumerate(downloads)]) if nodes else need
    seconds = np.concatenate([sizes[d.shards] for d in downloads]).astype(np.float64) / bandwidth if nodes else \
        np.zeros(0)
    order = np.lexsort((node_of, need))  # by step, then node; stable within a node keeps request order
    need, node_of, seconds = need[order].tolist(), node_of[order].tolist(), seconds[order].tolist()

    finish = [0.0] * nodes
    busy = [0.0] * nodes
    history_steps: list[int] = []
    history_start: list[float] = []
    prev_step, prev_start = -1, -c  # step -1 "starts" at -c, so step 0 may start at 0
    stalled, stall = 0, 0.0

    def start_of(step: int) -> float:
        if step >= prev_step:
            return prev_start + (step - prev_step) * c
        at = bisect.bisect_right(history_steps, step) - 1
        if at < 0:
            return step * c
        return history_start[at] + (step - history_steps[at]) * c

    i, count = 0, len(need)
    while i < count:
        step = need[i]
        ready = prev_start + (step - prev_step) * c  # when the step could start with no download
        latest = ready
        while i < count and need[i] == step:
            node = node_of[i]
            request = max(step - lookahead, 0)
            asked = start_of(request) if request < step else ready
            begin = max(asked, finish[node])
            finish[node] = begin + seconds[i]
            busy[node] += seconds[i]
            latest = max(latest, finish[node])
            i += 1
        if latest > ready and step > 0:
            stalled += 1
            stall += latest - ready
        history_steps.append(step)
        history_start.append(latest)
        prev_step, prev_start = step, latest
    first_start = history_start[0] if history_steps and history_steps[0] == 0 else 0.0
    last = prev_start + (total_steps - 1 - prev_step) * c if total_steps else 0.0
    return Timeline(startup_seconds=first_start, first_batch_seconds=first_start + c,
                    total_seconds=max(last + c, 0.0), stalled_steps=stalled, stall_seconds=stall, busy_seconds=busy,
                    event_steps=np.asarray(history_steps, np.int64), event_start=np.asarray(history_start))
