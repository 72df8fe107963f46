"""Format-independent writer machinery: sharding, compression, hashing, uploads and a transactional index.

A format plugin subclasses :class:`ShardWriter` and implements :meth:`~ShardWriter.encode_sample`,
:meth:`~ShardWriter.get_config` and :meth:`~ShardWriter.encode_shard` (and, for formats whose shards carry a
header counted against ``size_limit``, :meth:`~ShardWriter.shard_overhead`). Everything else lives here: the
reference's keyword arguments and their validation, the flush rule (including its empty-first-shard quirk), shard
naming, the ``out`` forms, parallel uploads through the storage registry, and the commit of ``index.json`` strictly
after every shard it names is written, uploaded and confirmed.
"""

from __future__ import annotations

import logging
import numbers
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

from streaming_core.common.arguments import bytes_to_int
from streaming_core.errors import (
    CodecError,
    DirectoryNotEmptyError,
    PermanentStorageError,
    StorageError,
    StreamingError,
    UnknownNameError,
    UploadError,
)
from streaming_core.reading.cache_record import (
    forget_record,
    is_in_place,
    path_key,
    record_written_in_place,
    remote_key,
)
from streaming_core.reading.index_file import INDEX_BASENAME, index_text, write_index
from streaming_core.reading.shard_entry import MAX_SHARD_BYTES
from streaming_core.storage.compression import parse_compression
from streaming_core.storage.facade import (
    check_output,
    exists,
    is_remote,
    join,
    list_objects,
    local_path,
    upload_file,
    url_scheme,
)
from streaming_core.storage.hashing import get_hash
from streaming_core.storage.redact import redact_repr, redact_url
from streaming_core.writing.output_lock import OutputLock

__all__ = ['ShardWriter', 'parse_out', 'parse_size_limit', 'MAX_SHARD_BYTES', 'ShardTooLargeError',
           'MissingColumnError', 'WRITER_KWARGS', 'upload_empty_index']

logger = logging.getLogger('streaming_core.writing.writer')

T = TypeVar('T')

#: The extra keyword arguments every writer accepts (the reference's four, plus two of ours).
WRITER_KWARGS = frozenset({'progress_bar', 'max_workers', 'retry', 'exist_ok', 'storage_options', 'upload_timeout'})



def _clear_directory(path: str) -> None:
    """Remove what ``path`` holds, keeping the directory itself (a symbolic link to a directory stays a link, its
    target is emptied; links inside it are removed, never followed)."""
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


class ShardTooLargeError(StreamingError, ValueError):
    """A sample, or a shard with no ``size_limit``, would pass the 4 GiB that 32-bit offsets can address."""


class MissingColumnError(CodecError, KeyError):
    """A sample given to a writer lacks one of the declared columns."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ''


def parse_size_limit(size_limit: int | str | None) -> int | None:
    """The reference's ``size_limit`` rules: falsy means no limit; negative or ``>= 2**32`` is an error.

    The string ``'0'`` parses to 0, which is stored as 0 and behaves as no limit (as in the reference).
    """
    if not size_limit:
        return None
    value = bytes_to_int(size_limit)
    if value < 0:
        raise ValueError(f'`size_limit` must be greater than zero, instead, found as {value}.')
    if value >= 1 << 32:
        raise ValueError(f'`size_limit` must be less than 2**32, instead, found as {value}. This is because sample '
                         f'byte offsets are stored with uint32.')
    return value


def parse_out(out: str | Sequence[str]) -> tuple[str, str | None, bool]:
    """Split ``out`` into ``(local dir, remote or None, local is a temporary dir we created)``.

    * a local path or ``file://`` URL: write there, no upload;
    * a remote URL: write to a fresh temporary directory and upload to the URL;
    * a ``(local, remote)`` tuple: write to ``local`` and upload to ``remote`` (a local path means copying).
    """
    from streaming_core.machinery.lookup import get_registry
    check_output(out)
    if isinstance(out, str):
        if not out:
            raise ValueError('Invalid `out` argument: an empty string. Give a directory, a URL or (local, remote).')
        if is_remote(out):
            _check_scheme(get_registry('storage'), out)
            return tempfile.mkdtemp(prefix='streaming-writer-'), out.rstrip('/'), True
        return local_path(out), None, False
    if isinstance(out, (tuple, list)):
        if len(out) != 2 or not all(isinstance(x, str) and x for x in out):
            raise ValueError(f'Invalid `out` argument: {redact_repr(out)}. A tuple must be (local directory, remote '
                             f'URL).')
        local, remote = out
        if is_remote(local):
            raise ValueError(f'Invalid `out` argument: the first element of {redact_repr(out)} must be a local '
                             f'directory.')
        _check_scheme(get_registry('storage'), remote)
        if is_in_place(remote, local_path(local)):
            return local_path(local), None, False  # the "remote" is the local directory itself: nothing to upload
        return local_path(local), remote.rstrip('/'), False
    raise ValueError(f'Invalid `out` argument: {redact_repr(out)}. Give a directory, a URL or a (local, remote) '
                     f'tuple.')


def upload_empty_index(url: str, *, timeout: float, retries: int, options: Mapping[str, Any] | None) -> None:
    """Upload an index of no shards to ``url``: a rewrite empties the remote's index before it overwrites any shard,
    so one that dies midway, or a reader meanwhile, never sees an index naming shards that changed under it."""
    with tempfile.TemporaryDirectory(prefix='streaming-empty-index-') as scratch:
        empty = os.path.join(scratch, INDEX_BASENAME)
        with open(empty, 'w', encoding='utf-8') as handle:
            handle.write(index_text([]))
        upload_file(empty, url, timeout=timeout, retries=retries, options=options)


def _check_scheme(storage: Any, url: str) -> None:
    scheme = url_scheme(url) or 'file'
    try:
        storage.get(scheme)
    except UnknownNameError as err:
        hint = str(err).partition('\n')[2]  # the registry's headline would say the same again
        raise UnknownNameError('\n'.join(filter(None, [f'Invalid Cloud provider prefix: {scheme} (in '
                                                        f'out={redact_repr(url)}) is not a registered storage '
                                                        f'scheme.', hint]))) from None


class ShardWriter:
    """Base class of the shard writers (MDS, JSON, CSV/TSV/XSV and third-party formats).

    Args:
        out: A local directory, a remote URL, or a ``(local, remote)`` tuple.
        keep_local: With a remote, keep the local files after uploading them (default: delete each file once it
            is uploaded and confirmed, then remove the directories left empty).
        compression: ``None`` or a compression string such as ``'zstd'`` or ``'zstd:7'``.
        hashes: Hash names recorded per file; must be in sorted order.
        size_limit: The shard size at which a new shard starts: an int, a string like ``'64mb'``, or ``None`` for
            no limit (a shard must still stay below 4 GiB, else :class:`ShardTooLargeError`).
        **kwargs: The options below (any other name is refused).

    Keyword Args:
        progress_bar (bool): Show a tqdm bar of samples written.
        max_workers (int): Upload threads (default: Python's executor default).
        retry (int): Attempts per remote request (each upload, and the checks of the remote output), as in the reference
            (at least 1).
        exist_ok (bool): Allow a non-empty output: the local directory is cleared first. Without it a non-empty local
            directory, or a remote that already holds an ``index.json``, is refused.
        storage_options (Mapping[str, Any]): Options passed to the remote's storage backend (endpoint, profile, ...).
        upload_timeout (float): The timeout of each attempt of each remote request, in seconds (default 60). A
            request to an endpoint that never answers fails after about ``retry * upload_timeout`` seconds plus the
            backoff between attempts; the error says the time spent, the attempts and this timeout.
    """

    format: str = ''
    extra_bytes_per_sample: int = 0
    part_names: tuple[str, ...] = ('data',)
    #: An optional faster ``encode(sample) -> bytes | None`` a format sets per writer (MDS compiles one for its
    #: columns), only when the writer's class does not override :meth:`encode_sample` (a subclass's override must
    #: run). ``None`` from it means "not this way": :meth:`encode_sample` then runs and raises the precise error.
    _encode_fast: Callable[[Mapping[str, Any]], bytes | None] | None = None

    def __init__(self, *, out: str | Sequence[str], keep_local: bool = False, compression: str | None = None,
                 hashes: list[str] | None = None, size_limit: int | str | None = 1 << 26, **kwargs: Any) -> None:
        invalid = sorted(set(kwargs) - WRITER_KWARGS)
        if invalid:
            raise ValueError(f'Invalid Writer argument(s): {invalid}. Valid extra arguments are '
                             f'{sorted(WRITER_KWARGS)}.')
        self.keep_local = bool(keep_local)
        self.compression = compression or None
        self._compressor, self._level = None, None
        if self.compression:  # its errors say "Invalid compression: ..." with what is valid, once
            self._compressor, self._level = parse_compression(self.compression)
        if hashes is not None and (isinstance(hashes, str) or not all(isinstance(h, str) for h in hashes)):
            raise ValueError(f'Invalid hashes: {hashes!r}. Give a sorted list of hash names such as ["sha1"].')
        self.hashes = list(hashes or [])
        if self.hashes != sorted(self.hashes):
            raise ValueError('Hashes must be unique and in sorted order.')
        self._hashers = [(name, get_hash(name)) for name in self.hashes]  # errors say "Invalid hash: ...", once
        self.size_limit = parse_size_limit(size_limit)
        self.progress_bar = bool(kwargs.get('progress_bar', False))
        retry = kwargs.get('retry', 2)
        if isinstance(retry, bool) or not isinstance(retry, numbers.Integral) or retry < 1:
            raise ValueError(f'retry must be an integer of at least 1 (the number of attempts per upload), got '
                             f'{retry!r}.')
        self.retry = int(retry)
        max_workers = kwargs.get('max_workers')
        if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, numbers.Integral)
                                        or max_workers < 1):
            raise ValueError(f'max_workers must be a positive integer or None, got {max_workers!r}.')
        self.exist_ok = bool(kwargs.get('exist_ok', False))
        self.storage_options = dict(kwargs.get('storage_options') or {})
        upload_timeout = kwargs.get('upload_timeout', 60.0)
        if isinstance(upload_timeout, bool) or not isinstance(upload_timeout, numbers.Real) or upload_timeout <= 0:
            raise ValueError(f'upload_timeout must be a positive number of seconds (the timeout of each attempt of '
                             f'each remote request), got {upload_timeout!r}.')
        self.upload_timeout = float(upload_timeout)
        self._config_cache: dict[str, Any] | None = None
        #: Bytes of a new shard counted against ``size_limit`` before any sample (the reference's accounting).
        self.extra_bytes_per_shard = self.shard_overhead()
        self._uncounted = self.uncounted_bytes_per_shard()
        self._max_size = MAX_SHARD_BYTES - self._uncounted  # the most a shard may count against the 4 GiB limit
        self.local, self.remote, self._local_is_temp = parse_out(out)
        self._emptied_remote = False  # exist_ok replaced a remote dataset by an empty index
        # One key formula for both: a directory is one output whether it is named as the local directory of one
        # writer or as the (local-path or file://) remote of another. The local directory is keyed as written (the
        # writer does not expand '~', so neither does its key).
        keys = [path_key(self.local)] + ([remote_key(self.remote)] if self.remote else [])
        self._output_lock: OutputLock | None = OutputLock(keys, redact_url(self.remote) if self.remote else self.local)
        try:
            self._prepare_output()
        except BaseException:
            self._output_lock.release()
            raise
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix='shard-upload') \
            if self.remote else None
        self._futures: list[Future[None]] = []
        self._upload_error: BaseException | None = None
        self._error_lock = threading.Lock()
        #: Serialises :meth:`write`, :meth:`flush_shard` and :meth:`finish`: a writer shared by threads keeps every
        #: sample once (in the order the threads reach it).
        self._write_lock = threading.RLock()
        self.shards: list[dict[str, Any]] = []
        self._samples: list[bytes] = []
        self._shard_size = self.extra_bytes_per_shard
        self._finished = False
        self._finish_error: BaseException | None = None  # why finish() failed, told again by a second call
        self._bar = None
        if self.progress_bar:
            from tqdm.auto import tqdm
            self._bar = tqdm(desc=f'Writing {self.format} shards', unit=' samples', dynamic_ncols=True)

    # ----------------------------------------------------------------------------------------------------------
    # Hooks for format plugins.
    def encode_sample(self, sample: Mapping[str, Any]) -> bytes:
        """Encode one sample into the bytes a shard stores for it (override)."""
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        """The shard entry fields shared by every shard of this writer (override; call ``super()``)."""
        return {'version': 2, 'format': self.format, 'compression': self.compression, 'hashes': self.hashes,
                'size_limit': self.size_limit}

    def encode_shard(self, samples: Sequence[bytes]) -> dict[str, bytes]:
        """The raw file contents of one shard, keyed by part name (``'data'``, and ``'meta'`` for split formats)."""
        raise NotImplementedError

    def shard_overhead(self) -> int:
        """Bytes a new shard counts against ``size_limit`` before any sample (MDS: its header; default 0)."""
        return 0

    # The reference's names, for subclasses written for it: a subclass that overrides one of these is called
    # instead of :meth:`encode_shard`; ``super()`` gives the format's own files.
    def encode_joint_shard(self) -> bytes:
        """The data file of the shard being flushed (a one-file format), from :attr:`new_samples`."""
        return self.encode_shard(self._samples)['data']

    def encode_split_shard(self) -> tuple[bytes, bytes]:
        """The data and meta files of the shard being flushed (a format with both), from :attr:`new_samples`."""
        files = self.encode_shard(self._samples)
        return files['data'], files['meta']

    def _shard_files(self, samples: list[bytes]) -> dict[str, bytes]:
        kind = type(self)
        if kind.encode_joint_shard is not ShardWriter.encode_joint_shard:
            return {'data': self.encode_joint_shard()}
        if kind.encode_split_shard is not ShardWriter.encode_split_shard:
            data, meta = self.encode_split_shard()
            return {'data': data, 'meta': meta}
        return self.encode_shard(samples)

    @property
    def new_samples(self) -> list[bytes]:
        """The encoded samples of the shard being filled (the reference's name)."""
        return self._samples

    @new_samples.setter
    def new_samples(self, value: list[bytes]) -> None:
        self._samples = value

    @property
    def new_shard_size(self) -> int:
        """The bytes the shard being filled counts against ``size_limit`` (the reference's name)."""
        return self._shard_size

    @new_shard_size.setter
    def new_shard_size(self, value: int) -> None:
        self._shard_size = value

    def _reset_cache(self) -> None:
        """Start an empty shard buffer (the reference's idiom after a manual :meth:`flush_shard`, which already
        does it here)."""
        self._samples = []
        self._shard_size = self.extra_bytes_per_shard

    def uncounted_bytes_per_shard(self) -> int:
        """Bytes of the data file that ``size_limit`` does not count (the XSV header line); used for the 4 GiB
        check only.
        """
        return 0

    # ----------------------------------------------------------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        """The cached :meth:`get_config` (constant for a writer)."""
        if self._config_cache is None:
            self._config_cache = self.get_config()
        return self._config_cache

    def _prepare_output(self) -> None:
        if os.path.exists(self.local) and not os.path.isdir(self.local):
            raise NotADirectoryError(f'Writer output {self.local} exists and is not a directory.')
        if os.path.isdir(self.local) and os.listdir(self.local) and not self._local_is_temp:
            if not self.exist_ok:
                raise DirectoryNotEmptyError(f'Directory is not empty: {self.local}. Pass exist_ok=True to remove '
                                             f'everything in it first (every file, not only an earlier dataset), or '
                                             f'choose an empty directory.')
            logger.warning('Directory %s is not empty; exist_ok=True, so everything in it is removed.', self.local)
            _clear_directory(self.local)
        os.makedirs(self.local, exist_ok=True)
        if self.remote:
            remote_index = join(self.remote, INDEX_BASENAME)
            if self._remote_call(f'The check for an existing dataset at {redact_url(remote_index)}', lambda: exists(
                    remote_index, timeout=self.upload_timeout, retries=self.retry - 1, options=self.storage_options)):
                if not self.exist_ok:
                    raise DirectoryNotEmptyError(f'The remote output already holds a dataset: '
                                                 f'{redact_url(remote_index)}. Pass exist_ok=True to overwrite it, '
                                                 f'or choose another location.')
                self._uncommit_remote(remote_index)
            elif not self.exist_ok:
                leftovers = self._remote_objects()
                if leftovers:
                    raise DirectoryNotEmptyError(f'The remote output is not empty: {len(leftovers)} object(s) under '
                                                 f'{redact_url(self.remote)}, for example '
                                                 f'{redact_url(leftovers[0])} (a writer that did not finish?). Pass '
                                                 f'exist_ok=True to write over them, or choose another location.')

    def _remote_objects(self) -> list[str]:
        """Objects already under the remote output (empty when the backend cannot list)."""
        prefix = self.remote.rstrip('/') + '/'
        try:
            return self._remote_call(f'The listing of {redact_url(prefix)}', lambda: list_objects(
                prefix, timeout=self.upload_timeout, retries=self.retry - 1, options=self.storage_options),
                passthrough=(PermanentStorageError, NotImplementedError))
        except (PermanentStorageError, NotImplementedError):
            return []

    def _uncommit_remote(self, remote_index: str) -> None:
        """Replace the remote's index with an empty one before any shard is overwritten, so a rewrite that dies
        midway leaves no index naming shards that have changed under it."""
        logger.warning('%s already holds a dataset; exist_ok=True, so it is replaced.', redact_url(self.remote))
        self._emptied_remote = True
        self._remote_call(f'The upload of an empty index to {redact_url(remote_index)}', lambda: upload_empty_index(
            remote_index, timeout=self.upload_timeout, retries=self.retry - 1, options=self.storage_options))

    def _remote_call(self, what: str, action: Callable[[], T], passthrough: tuple[type[BaseException], ...] = ()) -> T:
        """Run one remote request (retried ``retry`` times by the storage layer). A failure that was retried is
        re-raised as one :class:`UploadError` saying the time spent, the attempts and ``upload_timeout``; one that
        retrying cannot fix (access denied, not found) is raised as it is.
        """
        start = time.monotonic()
        try:
            return action()
        except passthrough:
            raise
        except Exception as err:
            elapsed = time.monotonic() - start
            cause = err.__cause__ if isinstance(err, UploadError) and err.__cause__ is not None else err
            if isinstance(cause, (PermanentStorageError, FileNotFoundError, PermissionError)):
                raise  # never retried: its own message says what to fix
            # A storage error already names the action and the URL.
            detail = str(err) if isinstance(err, StorageError) else f'{what} failed: {type(err).__name__}: {err}'
            raise UploadError(
                f'{detail} [gave up after {self.retry} attempt(s) (retry={self.retry}) in {elapsed:.1f} s in all; '
                f'each attempt may take up to upload_timeout={self.upload_timeout:g} s, plus backoff between '
                f'attempts: lower either to fail sooner, or check the endpoint and storage_options]') from cause

    def _raise_upload_error(self) -> None:
        err = self._upload_error
        for future in self._futures:
            future.cancel()
        raise UploadError(f'An upload of this {self.format} writer failed, so the dataset will not be committed '
                          f'(no index.json is written).{self._replaced_note()} {err}') from err

    def _replaced_note(self) -> str:
        return (' The dataset the remote held was already replaced by an empty index (exist_ok=True), so readers of '
                'it now find no samples: write it again.' if self._emptied_remote else '')

    def write(self, sample: Mapping[str, Any]) -> None:
        """Encode and append one sample, starting a new shard first when ``size_limit`` would be exceeded.

        Raises:
            UploadError: an earlier shard failed to upload (the dataset will not be committed).
            ShardTooLargeError: the sample alone, or the shard with no ``size_limit``, would pass 4 GiB.
        """
        if self._upload_error is not None:
            self._raise_upload_error()
        if self._finished:
            raise RuntimeError('This writer is finished; create a new writer to write more samples.')
        fast = self._encode_fast
        data = fast(sample) if fast is not None else None
        if data is None:
            data = self.encode_sample(sample)
        cost = len(data) + self.extra_bytes_per_sample
        with self._write_lock:
            if self._finished:
                raise RuntimeError('This writer is finished; create a new writer to write more samples.')
            size = self._shard_size + cost
            limit = self.size_limit
            if limit and limit < size:
                if self.extra_bytes_per_shard + cost > self._max_size:
                    self._too_large(cost)  # raise before flushing: the sample fits in no shard
                self.flush_shard()
                size = self._shard_size + cost
            if size > self._max_size:
                self._too_large(cost)
            self._samples.append(data)
            self._shard_size = size
            if self._bar is not None:
                self._bar.update(1)

    def _too_large(self, cost: int) -> None:
        """Raise :class:`ShardTooLargeError` for a sample that does not fit (alone, or in a shard with no limit)."""
        if self.extra_bytes_per_shard + cost > self._max_size:
            raise ShardTooLargeError(
                f'A sample of {cost - self.extra_bytes_per_sample} bytes does not fit in a {self.format} shard: '
                f'shards index their samples with 32-bit offsets, so a shard file must stay below 4 GiB '
                f'({MAX_SHARD_BYTES} bytes). Split the sample or store it elsewhere and write a reference to it.')
        raise ShardTooLargeError(
            f'Shard {len(self.shards)} of this {self.format} writer would pass 4 GiB ({MAX_SHARD_BYTES} bytes) '
            f'with size_limit={self.size_limit!r}: shards index their samples with 32-bit offsets. Set a '
            f'size_limit below 4 GiB (for example "1gb").')

    def _basename(self, index: int, part: str) -> str:
        name = f'shard.{index:05}.{self.format}'
        return name + '.meta' if part == 'meta' else name

    def flush_shard(self) -> None:
        """Write the buffered samples as the next shard (even when empty, as the reference does)."""
        with self._write_lock:
            index = len(self.shards)
            samples = self._samples
            files = self._shard_files(samples)
            entry = dict(self.config)
            entry['samples'] = len(samples)
            written = []
            for part in self.part_names:
                raw = files[part]
                basename = self._basename(index, part)
                entry[f'raw_{part}'] = self._file_info(basename, raw)
                if self._compressor is not None:
                    zipped = self._compressor.compress(raw, self._level)
                    zip_name = f'{basename}.{self._compressor.extension}'
                    entry[f'zip_{part}'] = self._file_info(zip_name, zipped)
                    data, name = zipped, zip_name
                else:
                    entry[f'zip_{part}'] = None
                    data, name = raw, basename
                with open(os.path.join(self.local, name), 'wb') as handle:
                    handle.write(data)
                written.append(name)
            self.shards.append(entry)
            for name in written:
                self._submit_upload(name)
            self._samples = []
            self._shard_size = self.extra_bytes_per_shard
            if self._bar is not None:
                self._bar.set_postfix(shards=len(self.shards))

    def _file_info(self, basename: str, data: bytes) -> dict[str, Any]:
        return {'basename': basename, 'bytes': len(data), 'hashes': {name: hasher(data)
                                                                      for name, hasher in self._hashers}}

    def _submit_upload(self, name: str) -> None:
        if self._executor is None:
            return
        future = self._executor.submit(self._upload, name)
        future.add_done_callback(self._upload_done)
        self._futures.append(future)

    def _upload_done(self, future: Future[None]) -> None:
        if future.cancelled():
            return
        err = future.exception()
        if err is not None:
            with self._error_lock:
                if self._upload_error is None:
                    self._upload_error = err

    def _upload(self, name: str) -> None:
        assert self.remote is not None
        path = os.path.join(self.local, name)
        url = join(self.remote, name)
        self._remote_call(f'The upload of {path} to {redact_url(url)}', lambda: upload_file(
            path, url, timeout=self.upload_timeout, retries=self.retry - 1, options=self.storage_options))
        if not self.keep_local:
            os.remove(path)

    def finish(self) -> None:
        """Flush the last shard, wait for every upload, then commit ``index.json`` (uploaded strictly last).

        A second call does nothing after a commit; after a failed one it raises again (the dataset was not committed,
        and a writer cannot finish twice: write the dataset again).

        Raises:
            UploadError: when any upload failed; ``index.json`` is then neither uploaded nor left locally naming
                files that are gone.
        """
        with self._write_lock:
            if self._finished:
                if self._finish_error is not None:
                    kind = UploadError if isinstance(self._finish_error, UploadError) else RuntimeError
                    raise kind(f'This {self.format} writer\'s finish() failed, so the dataset was not committed, and a '
                               f'writer cannot finish twice: write the dataset again. The failure: '
                               f'{self._finish_error}') from self._finish_error
                return
            self._finished = True
        try:
            with self._write_lock:
                if self._upload_error is None and self._samples:
                    self.flush_shard()
            self._wait_uploads()
            self._commit_index()
        except BaseException as err:
            self._finish_error = err
            raise
        finally:
            self._close()

    def abandon(self) -> None:
        """Stop without committing: no ``index.json`` is written (the shard files already written stay, as after a
        crash; a later writer of the output needs ``exist_ok=True``), pending uploads are cancelled, and the output
        is released for another writer. For code that must not commit a partial dataset when it fails (leaving a
        ``with`` block by an exception commits the samples written so far). Does nothing after :meth:`finish` or
        another :meth:`abandon`."""
        with self._write_lock:
            if self._finished:
                return
            self._finished = True
        self._close()

    def _close(self) -> None:
        """Stop the upload threads (cancelling what has not started), close the progress bar, release the output."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        if self._bar is not None:
            self._bar.close()
        if self._output_lock is not None:
            self._output_lock.release()

    def _commit_index(self) -> None:
        text = index_text(self.shards)
        index_path = os.path.join(self.local, INDEX_BASENAME)
        write_index(index_path, self.shards, text)
        if self.remote is None:
            record_written_in_place(self.local, text.encode('utf-8'))
            return
        forget_record(self.local)  # what it said of the directory's earlier contents (a dataset of its own...)
        try:
            url = join(self.remote, INDEX_BASENAME)
            self._remote_call(f'The upload of {index_path} to {redact_url(url)}', lambda: upload_file(
                index_path, url, timeout=self.upload_timeout, retries=self.retry - 1, options=self.storage_options))
        except BaseException:
            if not self.keep_local:
                os.remove(index_path)  # the local shards are gone; never leave an index naming them
            raise
        if not self.keep_local:
            os.remove(index_path)
            if self._local_is_temp:
                shutil.rmtree(self.local, ignore_errors=True)
            else:
                self._remove_empty_dirs()

    def _wait_uploads(self) -> None:
        errors = []
        for future in self._futures:
            try:
                future.result()
            except BaseException as err:  # collect all, report the first
                errors.append(err)
        if self._upload_error is not None and not errors:
            errors.append(self._upload_error)
        if errors:
            raise UploadError(f'{len(errors)} upload(s) of this {self.format} writer failed, so the dataset was not '
                              f'committed (no index.json was written).{self._replaced_note()} First error: '
                              f'{errors[0]}') from errors[0]

    def _remove_empty_dirs(self) -> None:
        """Remove the local directories left empty (deepest first); ``rmdir`` never removes a file."""
        for dirpath, _, _ in sorted(os.walk(self.local), key=lambda item: -len(item[0])):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass

    def __enter__(self) -> 'ShardWriter':
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            self.finish()
            return
        # Leaving by an exception: commit the samples completely written so far, unless an upload failed.
        try:
            self.finish()
        except Exception as err:
            logger.error('Writer could not commit after an exception in its block: %s', err)
            if hasattr(exc, 'add_note'):
                exc.add_note(f'The writer did not commit index.json: {err}')

    def __del__(self) -> None:
        if not getattr(self, '_finished', True):
            written = len(getattr(self, '_samples', ())) + sum(s.get('samples', 0) for s in getattr(self, 'shards', ()))
            if written:
                try:
                    logger.warning('The %s writer of %s was dropped without finish(): its %d sample(s) were not '
                                   'committed (no index.json). Use it as a context manager (with ... as writer:) or '
                                   'call writer.finish().', self.format, getattr(self, 'local', '?'), written)
                except Exception:  # noqa: BLE001 (interpreter shutdown: logging may be gone)
                    pass
        lock = getattr(self, '_output_lock', None)
        if lock is not None:
            lock.release()
        executor = getattr(self, '_executor', None)
        if executor is not None and not getattr(self, '_finished', True):
            executor.shutdown(wait=False, cancel_futures=True)
