"""Parse the values users give as arguments: byte sizes (``'64mb'``), counts (``'100k'``), comma-separated lists.

The dataset's ``cache_limit``, ``epoch_size`` and ``predownload``, the writers' ``size_limit``, the simulator's
options and the command line all take these forms; the reference exposes them as ``streaming.base.util``.
"""

from __future__ import annotations

import numbers
import re

__all__ = ['bytes_to_int', 'number_abbrev_to_int', 'get_list_arg']

_BYTE_SUFFIXES = {'kb': 1 << 10, 'mb': 1 << 20, 'gb': 1 << 30, 'tb': 1 << 40, 'pb': 1 << 50, 'eb': 1 << 60,
                  'zb': 1 << 70, 'yb': 1 << 80}
_COUNT_SUFFIXES = {'k': 10**3, 'm': 10**6, 'b': 10**9, 't': 10**12}


def bytes_to_int(value: int | float | str) -> int:
    """Parse a byte size: an int, a float (truncated), digits, ``'<digits>b'``, ``'1.5gb'`` or ``'512MiB'`` (both
    suffix forms are powers of 1024; case does not matter).

    Raises:
        ValueError: ``'Unsupported value/suffix ...'`` for anything else (``''``, ``'12kbb'``).
    """
    if isinstance(value, bool):
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a byte count such as 1024 or "64mb".')
    if isinstance(value, numbers.Real):
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a byte count such as 1024 or "64mb".')
    text = value.strip().lower()
    if re.fullmatch(r'\d+', text):
        return int(text)
    match = re.fullmatch(r'(\d+)\s*b', text)
    if match:
        return int(match.group(1))
    match = re.fullmatch(r'(\d+(?:\.\d*)?|\.\d+)\s*([kmgtpezy])i?b', text)
    if match:
        return int(float(match.group(1)) * _BYTE_SUFFIXES[match.group(2) + 'b'])
    raise ValueError(f'Unsupported value/suffix {value!r}: expected a byte count such as 1024, "500b", "64mb" '
                     f'or "1.5gb" (kb..yb, or kib..yib, are powers of 1024).')


def number_abbrev_to_int(value: int | float | str) -> int:
    """Parse a count: an int, a float (truncated), or ``'100k'``, ``'64M'``, ``'1.5b'`` (powers of 10)."""
    if isinstance(value, bool):
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a count such as 1000 or "100k".')
    if isinstance(value, numbers.Real):
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a count such as 1000 or "100k".')
    text = value.strip().lower()
    match = re.fullmatch(r'(-?\d+(?:\.\d*)?|-?\.\d+)\s*([kmbt]?)', text)
    if not match:
        raise ValueError(f'Unsupported value/suffix {value!r}: expected a count such as 1000, "100k", "64m", '
                         f'"1.5b" (k, m, b, t are powers of 10).')
    number, suffix = match.groups()
    if not suffix and '.' in number:  # as the reference: '3.3' is no count ('3.3k' is 3300)
        raise ValueError(f'Unsupported value {value!r}: a count without a suffix must be a whole number.')
    return int(float(number) * _COUNT_SUFFIXES.get(suffix, 1))


def get_list_arg(text: str | None) -> list[str]:
    """Split a comma-separated argument into a list (``None`` or ``''`` gives ``[]``)."""
    return [part for part in text.split(',') if part] if text else []
