"""Small shared helpers: size and count parsing, retry with backoff, the reference's JSON text."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import random
import re
import time
from typing import Any, Callable, Iterable, Iterator, TypeVar

__all__ = ['gc_paused', 'bytes_to_int', 'number_abbrev_to_int', 'retry', 'backoff_delays', 'get_list_arg', 'pyjson',
           'pyjson_sorted', 'redact_url']

logger = logging.getLogger('streaming_core')

_BYTE_SUFFIXES = {'kb': 1 << 10, 'mb': 1 << 20, 'gb': 1 << 30, 'tb': 1 << 40, 'pb': 1 << 50, 'eb': 1 << 60,
                  'zb': 1 << 70, 'yb': 1 << 80}
_COUNT_SUFFIXES = {'k': 10**3, 'm': 10**6, 'b': 10**9, 't': 10**12}

T = TypeVar('T')


def bytes_to_int(value: int | float | str) -> int:
    """Parse a byte size: an int, a float (truncated), digits, ``'<digits>b'`` or ``'1.5gb'`` (powers of 1024).

    Raises:
        ValueError: ``'Unsupported value/suffix ...'`` for anything else (``''``, ``'12kbb'``).
    """
    if isinstance(value, bool):
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a byte count such as 1024 or "64mb".')
    if isinstance(value, (int, float)):
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a byte count such as 1024 or "64mb".')
    text = value.strip().lower()
    if re.fullmatch(r'\d+', text):
        return int(text)
    match = re.fullmatch(r'(\d+)\s*b', text)
    if match:
        return int(match.group(1))
    match = re.fullmatch(r'(\d+(?:\.\d*)?|\.\d+)\s*([kmgtpezy]b)', text)
    if match:
        return int(float(match.group(1)) * _BYTE_SUFFIXES[match.group(2)])
    raise ValueError(f'Unsupported value/suffix {value!r}: expected a byte count such as 1024, "500b", "64mb" '
                     f'or "1.5gb" (kb..yb are powers of 1024).')


def number_abbrev_to_int(value: int | float | str) -> int:
    """Parse a count: an int, a float (truncated), or ``'100k'``, ``'64M'``, ``'1.5b'`` (powers of 10)."""
    if isinstance(value, bool):
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a count such as 1000 or "100k".')
    if isinstance(value, (int, float)):
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a count such as 1000 or "100k".')
    text = value.strip().lower()
    match = re.fullmatch(r'(-?\d+(?:\.\d*)?|-?\.\d+)\s*([kmbt]?)', text)
    if not match:
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a count such as 1000, "100k", "64m", '
                         f'"1.5b" (k, m, b, t are powers of 10).')
    number, suffix = match.groups()
    return int(float(number) * _COUNT_SUFFIXES.get(suffix, 1))


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


def get_list_arg(text: str | None) -> list[str]:
    """Split a comma-separated argument into a list (``None`` or ``''`` gives ``[]``)."""
    return [part for part in text.split(',') if part] if text else []


def pyjson(obj: Any) -> str:
    """Python's default ``json.dumps`` text (the reference's on-disk JSON)."""
    return json.dumps(obj)


def pyjson_sorted(obj: Any) -> str:
    """``json.dumps(obj, sort_keys=True)``: the text of ``index.json`` and the configs embedded in shards."""
    return json.dumps(obj, sort_keys=True)


_URL_SECRET = re.compile(r'(?i)((?:x-amz-[a-z-]*|signature|sig|token|key|secret|password|credential|sas)[^=&]*=)'
                         r'[^&]*')
_URL_USERINFO = re.compile(r'(?<=://)[^/@\s]*:[^/@\s]*@')


def redact_url(url: str) -> str:
    """Remove credentials from a URL (``user:pass@`` and signature/token query values) for messages and logs."""
    text = _URL_USERINFO.sub('***@', str(url))
    if '?' in text:
        head, _, query = text.partition('?')
        text = head + '?' + _URL_SECRET.sub(r'\1***', query)
    return text


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection inside the block (building many small objects at once: a collection would only walk
    them); restores the previous state."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
