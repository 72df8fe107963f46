"""A memory-capped reader of hostile datasets, driven line by line over stdin/stdout.

Usage: python -m tests.hardening.workers.read_server HEADROOM_MB

After importing the library and every format and compression plugin, the process caps its address space
(``RLIMIT_AS``) at its current size plus ``HEADROOM_MB``, so any allocation driven by a hostile file (a sample
count, an offset, a declared size, a decompression bomb) fails with ``MemoryError`` here instead of exhausting
the machine. Each request is one JSON line ``{"dir": PATH, "allow_unsafe_types": bool}``; each answer is one JSON
line: :func:`tests.hardening.hostile.read_everything`'s result plus ``seconds``. The parent detects a crash (the
process dies) and a hang (no answer in time).
"""

from __future__ import annotations

import json
import resource
import sys
import time


def _vm_size() -> int:
    with open('/proc/self/status') as handle:
        for line in handle:
            if line.startswith('VmSize:'):
                return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    headroom = int(sys.argv[1]) << 20
    import streaming_csv  # noqa: F401  - every plugin imported before the cap
    import streaming_jsonl  # noqa: F401
    import streaming_mds  # noqa: F401
    from streaming_core import StreamingDataset  # noqa: F401
    from streaming_core.machinery.lookup import get_registry
    from tests.hardening.hostile import read_everything
    for kind in ('format', 'compressor', 'codec', 'hash', 'storage', 'shuffle', 'batching'):
        get_registry(kind).names()
    for name in get_registry('compressor').names():  # lazy codec modules (zstd, lz4, brotli, cramjam)
        compressor = get_registry('compressor').get(name)
        compressor.decompress(compressor.compress(b'warm up', compressor.default_level))
    limit = _vm_size() + headroom
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.stdout.write(json.dumps({'ready': True, 'limit': limit}) + '\n')
    sys.stdout.flush()
    for line in sys.stdin:
        request = json.loads(line)
        start = time.monotonic()
        result = read_everything(request['dir'], allow_unsafe_types=bool(request.get('allow_unsafe_types')))
        result['seconds'] = time.monotonic() - start
        sys.stdout.write(json.dumps(result) + '\n')
        sys.stdout.flush()


if __name__ == '__main__':
    main()
