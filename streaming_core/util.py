"""Compatibility names and the one small helper still waiting for its home (issue 14 splits this module).

Moved out, re-exported here so that existing imports keep working (see the deprecation policy in
``docs/architecture.md``):

* :mod:`streaming_core.arguments`: :func:`bytes_to_int`, :func:`number_abbrev_to_int`, :func:`get_list_arg`.
* :mod:`streaming_core.retries`: :func:`retry`, :func:`backoff_delays`.
* :mod:`streaming_core.redact`: :func:`redact_url` (with the patterns it uses).
* :mod:`streaming_core.iteration`: :func:`gc_paused` (it pauses collection while an epoch's iterator is built).

Still defined here until the module that owns its job takes it: :func:`pyjson_sorted` (the JSON text of
``index.json`` and shard configs, for ``index.py``).
"""

from __future__ import annotations

import json
from typing import Any

from streaming_core.arguments import bytes_to_int, get_list_arg, number_abbrev_to_int
from streaming_core.iteration import gc_paused
from streaming_core.redact import _URL_SECRET as _URL_SECRET  # private names, kept for code that imported them
from streaming_core.redact import _URL_USERINFO as _URL_USERINFO
from streaming_core.redact import redact_url
from streaming_core.retries import backoff_delays, retry

__all__ = ['gc_paused', 'bytes_to_int', 'number_abbrev_to_int', 'retry', 'backoff_delays', 'get_list_arg',
           'pyjson_sorted', 'redact_url']


def pyjson_sorted(obj: Any) -> str:
    """``json.dumps(obj, sort_keys=True)``: the text of ``index.json`` and the configs embedded in shards."""
    return json.dumps(obj, sort_keys=True)
