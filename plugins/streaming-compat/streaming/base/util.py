"""``streaming.base.util``: the reference's utilities, each streaming-core's own implementation.

``clean_stale_shared_memory`` is a harmless no-op here (streaming-core creates no named shared memory, so a crash
leaves nothing stale). ``merge_index`` is :func:`streaming_core.writing.merge.merge_index` (both call forms).
"""

from __future__ import annotations

from streaming_core.common.arguments import bytes_to_int, get_list_arg, number_abbrev_to_int
from streaming_core.compat import clean_stale_shared_memory, get_import_exception_message, wait_for_file_to_exist
from streaming_core.reading.index_file import get_index_basename
from streaming_core.storage.retries import retry
from streaming_core.writing.merge import merge_index

__all__ = ['get_list_arg', 'wait_for_file_to_exist', 'bytes_to_int', 'number_abbrev_to_int',
           'clean_stale_shared_memory', 'get_import_exception_message', 'merge_index', 'retry', 'get_index_basename']
