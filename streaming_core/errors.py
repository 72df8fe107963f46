"""Exceptions raised by streaming-core and its plugins.

Every error the library raises on purpose derives from :class:`StreamingError`. Most also derive from the
exception type the reference system (mosaicml-streaming 0.13) raised in the same situation, so handlers written
against it (``except ValueError``, ``except RuntimeError``, ``except json.JSONDecodeError``) keep matching. A class
derives from a reference type only where the reference raises that type, so ``hasattr()`` (which swallows
``AttributeError``) and broad handlers elsewhere are not fooled.

Every class can be built from one message string: torch's DataLoader re-raises an error from a worker as
``type(err)(message)``, and a class that cannot be built that way would come back as a plain ``RuntimeError``.
"""

from __future__ import annotations

import json


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


class IndexJSONError(IndexFormatError, json.JSONDecodeError):
    """An ``index.json`` is empty or not valid JSON (``json.JSONDecodeError``, as in the reference).

    Unlike :class:`json.JSONDecodeError`, it is built from one message (``doc`` and ``pos`` are optional), so it
    survives torch's re-raise from a DataLoader worker and pickling.

    Args:
        message: The whole message (it names the file).
        doc: The text that failed to parse, if known.
        pos: The position of the error in ``doc``.
    """

    def __init__(self, message: str, doc: str = '', pos: int = 0) -> None:
        ValueError.__init__(self, message)
        self.msg = message
        self.doc = doc
        self.pos = pos
        self.lineno = doc.count('\n', 0, pos) + 1
        self.colno = pos - doc.rfind('\n', 0, pos)

    def __reduce__(self) -> tuple[type, tuple[str, str, int]]:
        return type(self), (self.msg, self.doc, self.pos)

    def __str__(self) -> str:
        return self.msg


class IndexNotFoundError(StreamingError, FileNotFoundError, RuntimeError):
    """A stream's ``index.json`` is absent locally and there is no remote to fetch it from.

    The reference raises ``RuntimeError`` for this case in ``StreamingDataset`` and ``FileNotFoundError`` from its
    readers and local downloads, so both kinds of handler match.
    """


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


class WaitTimeoutError(StreamingError, TimeoutError, RuntimeError):
    """A wait for another process (a download, a lock, an epoch plan) exceeded its timeout.

    Also a ``RuntimeError``: the reference's bounded waits (``index.json`` from the local leader,
    ``wait_for_file_to_exist``) raise that type.
    """


class CodecError(StreamingError, ValueError):
    """A value cannot be encoded or decoded with the requested column encoding."""


class ColumnTypeError(CodecError, TypeError, AttributeError):
    """A column value has a type its encoding does not take (MDS, JSON or XSV writers).

    Also an ``AttributeError``, the type the reference's encoders raise for a wrong value type. Raised only by
    encoding a value (never from an attribute lookup), so ``hasattr()`` is not affected.
    """


class SampleSizeError(CodecError, KeyError):
    """A pre-encoded value of a fixed-size column has the wrong length (``KeyError``, as in the reference)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ''


class UnknownSchemeError(UnknownNameError, ValueError):
    """No storage backend is registered for a URL scheme (``ValueError``, as the reference's unsupported remote)."""


class UnknownMethodError(UnknownNameError, ValueError):
    """A dataset argument names something no plugin registers (``batching_method``, ``stream_name``: a
    ``ValueError``, as the reference's argument check and registry error)."""


class NotSupportedError(StreamingError, NotImplementedError):
    """A feature of the reference that streaming-core does not provide (the message says what to use instead)."""


class DirectoryNotEmptyError(StreamingError, FileExistsError):
    """A writer's output directory is not empty and ``exist_ok`` is false (``FileExistsError``, as the reference)."""


class OutputBusyError(StreamingError, FileExistsError):
    """Another process is writing to the same output (its directory, or its remote) on this machine."""


class SampleAccessError(StreamingError, RuntimeError):
    """A sample could not be read after its shard was prepared again (``RuntimeError``, as in the reference)."""


class WorkerDiedError(StreamingError, RuntimeError):
    """A DataLoader worker process died (killed, out of memory, crashed) while the loader waited on it."""


class DatasetVersionError(StreamingError, RuntimeError):
    """Ranks of one job read different versions of a dataset (it changed while they started); the message names the
    streams and both ranks."""


class FormatOptionError(StreamingError, ValueError):
    """A stream's ``format_options`` (or ``columns=``) name an option its format does not take, or have a value the
    format refuses; the message names the option and the format."""


class UnknownColumnError(FormatOptionError, IndexFormatError):
    """``columns=`` names a column (field, key) the stream's data does not have. Both a :class:`FormatOptionError`
    (what every format raises for it) and an :class:`IndexFormatError` (what formats indexed from their files raised
    before)."""
