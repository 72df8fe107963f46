"""Compatibility names and the small helpers still waiting for their home (issue 14 splits this module).

Moved out, re-exported here so that existing imports keep working (see the deprecation policy in
``docs/architecture.md``):

* :mod:`streaming_core.arguments`: :func:`bytes_to_int`, :func:`number_abbrev_to_int`, :func:`get_list_arg`.
* :mod:`streaming_core.retries`: :func:`retry`, :func:`backoff_delays`.

Still defined here until the modules that own their job take them: :func:`pyjson_sorted` (the JSON text of
``index.json`` and shard configs, for ``index.py``), :func:`redact_url` (for ``redact.py``) and :func:`gc_paused`
(for the dataset's iterator set-up).
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from typing import Any, Iterator

from streaming_core.arguments import bytes_to_int, get_list_arg, number_abbrev_to_int
from streaming_core.retries import backoff_delays, retry

__all__ = ['gc_paused', 'bytes_to_int', 'number_abbrev_to_int', 'retry', 'backoff_delays', 'get_list_arg',
           'pyjson_sorted', 'redact_url']

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
