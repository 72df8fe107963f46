"""Retry with exponential backoff and jitter: the storage facade's delays and the reference's ``retry`` decorator."""

from __future__ import annotations

import functools
import random
import time
from typing import Any, Callable, Iterable, TypeVar

__all__ = ['retry', 'backoff_delays']

T = TypeVar('T')


def backoff_delays(attempts: int, initial: float = 1.0, max_jitter: float = 0.5,
                   max_delay: float = 30.0) -> Iterable[float]:
    """The sleep before each retry: ``initial * 2**i`` (capped) plus up to ``max_jitter`` seconds of jitter."""
    for i in range(max(attempts - 1, 0)):
        yield min(initial * 2**i, max_delay) + random.random() * max_jitter


def retry(exc_class: type[BaseException] | tuple[type[BaseException], ...] = Exception,
          clean_up_fn: Callable[[], Any] | None = None, num_attempts: int = 3, initial_backoff: float = 1.0,
          max_jitter: float = 0.5) -> Any:
    """Retry a function on ``exc_class``; usable as ``@retry`` or ``@retry(...)`` (the reference's signature).

    Sleeps ``initial_backoff * 2**i + random() * max_jitter`` between attempts, calls ``clean_up_fn`` after every
    failed attempt, and re-raises the last exception.
    """
    if callable(exc_class) and not isinstance(exc_class, type):
        return retry()(exc_class)
    if num_attempts < 1:
        raise ValueError('num_attempts must be at-least 1')

    def decorator(func: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            delays = list(backoff_delays(num_attempts, initial_backoff, max_jitter))
            for attempt in range(num_attempts):
                try:
                    return func(*args, **kwargs)
                except exc_class:
                    if clean_up_fn is not None:
                        clean_up_fn()
                    if attempt == num_attempts - 1:
                        raise
                    time.sleep(delays[attempt])
            raise AssertionError('unreachable')

        return wrapper

    return decorator
