"""Exceptions raised by streaming-core and its plugins.

Every error the library raises on purpose derives from :class:`StreamingError`. Most also derive from the
builtin exception the reference system (mosaicml-streaming) raised in the same situation, so code written
against it (``except ValueError``, ``except FileNotFoundError``) keeps working.
"""

from __future__ import annotations


class StreamingError(Exception):
    """Base class of every error raised on purpose by streaming-core."""


class UnknownNameError(StreamingError, LookupError):
    """A codec, compressor, hash, storage scheme, shard format, shuffle or batching name is not registered."""

    def __str__(self) -> str:  # LookupError/KeyError-style quoting would hide the newlines of the hint
        return str(self.args[0]) if self.args else ''


class DuplicateNameError(StreamingError, ValueError):
    """Two plugins registered the same name for the same kind."""


class PluginLoadError(StreamingError, ImportError):
    """A plugin's entry point failed to import or its registration hook raised."""


class IndexFormatError(StreamingError, ValueError):
    """An ``index.json`` is missing fields, has the wrong version or types, or is not valid JSON."""


class EmptyDatasetError(StreamingError, RuntimeError):
    """A stream's index lists no samples (``RuntimeError``, as in the reference)."""


class UnsafePathError(IndexFormatError):
    """An index entry names a file outside the dataset directory (``..``, an absolute path, a symlink)."""


class ShardCorruptError(StreamingError, ValueError):
    """A shard file disagrees with its index entry or with its own header (truncated, bad offsets, ...)."""


class UnsafeTypeError(StreamingError, ValueError):
    """A shard uses an encoding that can execute code on read (``pkl``) and unsafe types are not allowed."""


class HashMismatchError(StreamingError, ValueError):
    """A downloaded file does not match the hash recorded in the index."""


class StorageError(StreamingError, OSError):
    """A storage backend failed to download, upload, list or test a remote object."""


class PermanentStorageError(StorageError):
    """A storage failure that retrying cannot fix (access denied, bad credentials, bad URL). Never retried."""


class RemoteNotFoundError(StorageError, FileNotFoundError):
    """The remote object does not exist. Never retried."""


class TruncatedDownloadError(StorageError):
    """A download ended with fewer (or more) bytes than the index declares."""


class UploadError(StorageError):
    """A writer failed to upload a file; the dataset was not committed."""


class CacheLimitError(StreamingError, ValueError):
    """The cache limit is too small for the dataset or cannot be honoured."""


class WaitTimeoutError(StreamingError, TimeoutError):
    """A wait for another process (a download, a lock, an epoch plan) exceeded its timeout."""


class CodecError(StreamingError, ValueError):
    """A value cannot be encoded or decoded with the requested column encoding."""


class WorkerDiedError(StreamingError, RuntimeError):
    """A DataLoader worker process died (killed, out of memory, crashed) while the loader waited on it."""
