"""Compatibility names: what this module held before the core was laid out in wings, re-exported from its new homes.

Moved out, re-exported here so that existing imports keep working (see the deprecation policy in
``docs/architecture.md``):

* :mod:`streaming_core.common.arguments`: :func:`bytes_to_int`, :func:`number_abbrev_to_int`, :func:`get_list_arg`.
* :mod:`streaming_core.storage.retries`: :func:`retry`, :func:`backoff_delays`.
* :mod:`streaming_core.storage.redact`: :func:`redact_url` (with the patterns it uses).
* :mod:`streaming_core.reading.iteration`: :func:`gc_paused` (it pauses collection while an epoch's iterator is built).
* :mod:`streaming_core.reading.index_file`: :func:`pyjson_sorted` (the JSON text of ``index.json``).
"""

from __future__ import annotations

from streaming_core.common.arguments import bytes_to_int, get_list_arg, number_abbrev_to_int
from streaming_core.reading.index_file import pyjson_sorted
from streaming_core.reading.iteration import gc_paused
from streaming_core.storage.redact import _URL_SECRET as _URL_SECRET  # private names, kept for code that imported them
from streaming_core.storage.redact import _URL_USERINFO as _URL_USERINFO
from streaming_core.storage.redact import redact_url
from streaming_core.storage.retries import backoff_delays, retry

__all__ = ['gc_paused', 'bytes_to_int', 'number_abbrev_to_int', 'retry', 'backoff_delays', 'get_list_arg',
           'pyjson_sorted', 'redact_url']
