"""The end of a trainer client's process: the process group is destroyed for real before the interpreter exits.

The Hugging Face Trainer leaves the process group open, and its DDP wrapper keeps gloo running until the collector
frees it, which may be during interpreter finalization. A gloo worker thread that then drops a finished collective's
tensors needs the GIL, finds the interpreter finalizing and calls ``std::terminate`` ("terminate called without an
active exception", SIGABRT): pytorch/pytorch#190489, seen here in about one run of two of the Hugging Face tests
under CPU load before the clients ended this way.
"""

from __future__ import annotations

import gc
import os

import torch.distributed as dist


def native_threads() -> int:
    """This process's threads, gloo's included (from ``/proc``)."""
    return len(os.listdir('/proc/self/task'))


def end_distributed() -> None:
    """Collect the trainer's cycles (its DDP wrapper holds the group), then destroy the process group, so gloo's
    worker threads are joined while the interpreter is whole. Call it after the function that trained returned."""
    gc.collect()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
