"""Exception compatibility: our errors derive from the type the reference raises in the same situation, every error
class can be rebuilt from one message (torch re-raises worker errors that way), and handlers written for the
reference keep matching through ``import streaming``."""

from __future__ import annotations

import importlib
import json
import os
import pickle
import re
from typing import Any

import numpy as np
import pytest
import streaming
import torch
from streaming.base.compression import compress
from streaming.base.hashing import get_hash
from streaming.base.storage import CloudDownloader
from streaming.base.util import retry
from torch.utils.data import DataLoader, Dataset

from streaming_core import errors

# Every module of the core and the first-party plugins that defines an error class.
ERROR_MODULES = ['streaming_core.errors', 'streaming_core.storage.compression', 'streaming_core.storage.hashing',
                 'streaming_core.reading.index_sync', 'streaming_core.reading.cache_record',
                 'streaming_core.writing.writer', 'streaming_core.reading.shard_manager',
                 'streaming_core.tools.convert.runner', 'streaming_mds.encodings',
                 'streaming_datasets.conversion', 'streaming_datasets.base', 'streaming.base.registry_utils',
                 'streaming._conflict', 'streaming_core.reading.derived_index']


def _all_error_classes() -> list[type[BaseException]]:
    for name in ERROR_MODULES:
        importlib.import_module(name)
    found: list[type[BaseException]] = []
    todo: list[type[BaseException]] = [errors.StreamingError]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.append(cls)
            todo.extend(cls.__subclasses__())
    from streaming._conflict import ReferenceInstalledError
    found.append(ReferenceInstalledError)
    return sorted(found, key=lambda c: f'{c.__module__}.{c.__qualname__}')


CLASSES = _all_error_classes()
MESSAGE = 'Index file at /data/train/index.json: something specific went wrong (shard.00003.mds).'


@pytest.mark.parametrize('cls', CLASSES, ids=lambda c: c.__qualname__)
def test_built_from_one_message_and_pickled(cls: type[BaseException]) -> None:
    err = cls(MESSAGE)
    assert MESSAGE in str(err)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == str(err)


class _Raises(Dataset):
    def __init__(self, cls: type[BaseException]) -> None:
        self.cls = cls

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> Any:
        raise self.cls(MESSAGE)


@pytest.mark.parametrize('cls', CLASSES, ids=lambda c: c.__qualname__)
def test_survives_torchs_reraise(cls: type[BaseException]) -> None:
    """What a DataLoader does with a worker's error: wrap it (type + formatted traceback), re-raise it in the main
    process as ``type(message)``."""
    from torch._utils import ExceptionWrapper
    try:
        raise cls(MESSAGE)
    except BaseException:
        wrapper = ExceptionWrapper(where='in DataLoader worker process 0')
    with pytest.raises(cls) as info:
        wrapper.reraise()
    assert type(info.value) is cls  # not torch's RuntimeError fallback
    assert MESSAGE in str(info.value)


# A few classes through a real worker process as well (the classes above that need care).
REAL_WORKER = [errors.IndexJSONError, errors.ColumnTypeError, errors.SampleSizeError, errors.UnknownNameError,
               errors.IndexNotFoundError, errors.WaitTimeoutError]


def _from_a_worker(dataset: Any) -> BaseException:
    """The error torch raises in the main process for ``dataset``'s first item, read in one forked worker. Its
    traceback is dropped so the loader's iterator is released now: left in a traceback cycle, the garbage collector
    finalizes it later and torch then waits 5 s for the worker."""
    loader = DataLoader(dataset, batch_size=None, num_workers=1,
                        multiprocessing_context='fork' if os.name == 'posix' else None)
    try:
        next(iter(loader))
    except BaseException as err:  # noqa: BLE001 - the test checks which
        err.__traceback__ = None
        return err
    raise AssertionError('the worker raised nothing')


@pytest.mark.parametrize('cls', REAL_WORKER, ids=lambda c: c.__qualname__)
def test_survives_a_real_dataloader_worker(cls: type[BaseException]) -> None:
    err = _from_a_worker(_Raises(cls))
    assert type(err) is cls  # not torch's RuntimeError fallback
    assert MESSAGE in str(err)


class _Calls(Dataset):
    """A one-item dataset whose item runs ``action`` (in the worker: the loader is forked, nothing is pickled)."""

    def __init__(self, action: Any) -> None:
        self.action = action

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> Any:
        return self.action()


def _corrupt_index(tmp_path: Any) -> None:
    from streaming_core.reading.index_file import parse_index_text
    parse_index_text('{"shards": [', str(tmp_path / 'index.json'))


def _missing_index(tmp_path: Any) -> None:
    streaming.StreamingDataset(local=str(tmp_path / 'nothing'))


def _empty_local_directory(tmp_path: Any) -> None:
    (tmp_path / 'empty').mkdir(parents=True)
    streaming.StreamingDataset(local=str(tmp_path / 'empty'))


def _wrong_column_value(tmp_path: Any) -> None:
    with streaming.MDSWriter(out=str(tmp_path / 'w'), columns={'x': 'int'}) as writer:
        writer.write({'x': 'seven'})


def _unknown_stream_name(tmp_path: Any) -> None:
    (tmp_path / 'n').mkdir(parents=True)
    streaming.StreamingDataset(local=str(tmp_path / 'n'), stream_name='nope')


def _wrong_value_size(tmp_path: Any) -> None:
    with streaming.MDSWriter(out=str(tmp_path / 's'), columns={'x': 'uint64'}) as writer:
        writer.write({'x': np.array([1, 2], dtype=np.uint64)})


def _unknown_scheme(tmp_path: Any) -> None:
    streaming.StreamingDataset(remote='foo://bucket/x', local=str(tmp_path / 'l'))


def _unknown_batching(tmp_path: Any) -> None:
    (tmp_path / 'd').mkdir(parents=True)
    streaming.StreamingDataset(local=str(tmp_path / 'd'), batching_method='nope')


def _hash_mismatch(tmp_path: Any) -> None:
    remote = str(tmp_path / 'remote')
    with streaming.MDSWriter(out=remote, columns={'x': 'int'}, hashes=['sha1']) as writer:
        writer.write({'x': 1})
    with open(os.path.join(remote, 'shard.00000.mds'), 'r+b') as handle:
        handle.seek(-1, os.SEEK_END)
        handle.write(b'\x07')
    streaming.StreamingDataset(remote=remote, local=str(tmp_path / 'local'), validate_hash='sha1',
                               download_retry=0)[0]


# (situation, the reference's type a handler matches, our class, a phrase of the message)
SITUATIONS = [(_corrupt_index, json.JSONDecodeError, errors.IndexJSONError, 'empty or corrupted'),
              (_missing_index, RuntimeError, errors.IndexNotFoundError, 'does not exist either'),
              (_empty_local_directory, RuntimeError, errors.IndexNotFoundError, 'does not exist either'),
              (_wrong_column_value, AttributeError, errors.ColumnTypeError, "declared 'int'"),
              (_unknown_scheme, ValueError, errors.UnknownSchemeError, 'Unsupported remote path'),
              (_unknown_batching, ValueError, errors.UnknownMethodError, 'batching method'),
              (_hash_mismatch, ValueError, errors.HashMismatchError, 'Checksum failure'),
              (_wrong_value_size, KeyError, errors.SampleSizeError, 'Unexpected data size'),
              (_unknown_stream_name, ValueError, errors.UnknownMethodError, 'nope')]


@pytest.mark.parametrize('situation,reference_type,ours,phrase', SITUATIONS, ids=lambda v: getattr(v, '__name__', ''))
def test_real_situations_keep_their_type_family_through_a_dataloader_worker(
        tmp_path: Any, situation: Any, reference_type: type, ours: type, phrase: str) -> None:
    """The error raised in the main process and the one torch rebuilds from a worker's message (num_workers=1)
    both match a handler written for the reference and one written for our class."""
    with pytest.raises(reference_type, match=phrase) as direct:
        situation(tmp_path / 'main')
    assert isinstance(direct.value, ours)
    err = _from_a_worker(_Calls(lambda: situation(tmp_path / 'worker')))
    assert isinstance(err, reference_type) and re.search(phrase, str(err))
    assert type(err) is type(direct.value)  # not torch's RuntimeError fallback
    assert 'in DataLoader worker process 0' in str(err)


def test_json_decode_error_class_behaves_like_one() -> None:
    err = errors.IndexJSONError('Index file at /x/index.json is empty or corrupted.', '{"a": ', 6)
    assert isinstance(err, json.JSONDecodeError) and isinstance(err, ValueError)
    assert (err.msg, err.doc, err.pos, err.lineno, err.colno) == (str(err), '{"a": ', 6, 1, 7)
    assert str(err) == 'Index file at /x/index.json is empty or corrupted.'


def test_only_encoding_errors_are_attribute_errors() -> None:
    """``hasattr()`` swallows AttributeError: no error raised from attribute access may be one."""
    attribute_errors = {cls for cls in CLASSES if issubclass(cls, AttributeError)}
    assert attribute_errors == {cls for cls in CLASSES if issubclass(cls, errors.ColumnTypeError)}


def test_reference_types_of_the_new_classes() -> None:
    assert issubclass(errors.IndexNotFoundError, RuntimeError)
    assert issubclass(errors.IndexNotFoundError, FileNotFoundError)
    assert issubclass(errors.WaitTimeoutError, RuntimeError) and issubclass(errors.WaitTimeoutError, TimeoutError)
    assert issubclass(errors.ColumnTypeError, AttributeError) and issubclass(errors.ColumnTypeError, TypeError)
    assert issubclass(errors.SampleSizeError, KeyError)
    assert str(errors.SampleSizeError('Unexpected data size')) == 'Unexpected data size'  # not KeyError's quoting
    assert issubclass(errors.UnknownSchemeError, ValueError)
    assert issubclass(errors.DirectoryNotEmptyError, FileExistsError)
    assert issubclass(errors.NotSupportedError, NotImplementedError)
    assert issubclass(errors.SampleAccessError, RuntimeError)


# Handlers written for the reference, through `import streaming` (the situations the specs name).

def test_non_empty_output_directory_is_file_exists(int_dataset: str) -> None:
    with pytest.raises(FileExistsError, match='Directory is not empty'):
        streaming.MDSWriter(out=int_dataset, columns={'id': 'int'})


def test_empty_stream_is_runtime_error(tmp_path: Any) -> None:
    (tmp_path / 'index.json').write_text('{"shards": [], "version": 2}')
    with pytest.raises(RuntimeError):
        streaming.StreamingDataset(local=str(tmp_path))


def test_invalid_compression_and_hash_are_value_errors() -> None:
    with pytest.raises(ValueError, match='not a supported compression'):
        compress('zstd:0', b'x')
    with pytest.raises(ValueError):
        get_hash('sha3', b'x')
    with pytest.raises(ValueError):
        streaming.MDSWriter(out='/tmp/never-written', columns={'x': 'int'}, compression='gzip')
    with pytest.raises(ValueError, match='Hashes must be unique and in sorted order|sorted'):
        streaming.MDSWriter(out='/tmp/never-written', columns={'x': 'int'}, hashes=['sha1', 'md5'])


def test_unsupported_remote_is_value_error() -> None:
    with pytest.raises(ValueError, match='Unsupported remote path: foo://bucket/x'):
        CloudDownloader.get('foo://bucket/x')


def test_retry_with_no_attempts_is_value_error() -> None:
    with pytest.raises(ValueError, match='num_attempts must be at-least 1'):
        retry(num_attempts=0)


def test_out_of_range_index_is_index_error(int_dataset: str) -> None:
    with pytest.raises(IndexError):
        streaming.StreamingDataset(local=int_dataset).get_item(40)


def test_hash_mismatch_is_value_error(tmp_path: Any) -> None:
    remote = str(tmp_path / 'remote')
    with streaming.MDSWriter(out=remote, columns={'x': 'int'}, hashes=['sha1']) as writer:
        writer.write({'x': 1})
    with open(os.path.join(remote, 'shard.00000.mds'), 'r+b') as handle:
        handle.seek(-1, os.SEEK_END)
        handle.write(b'\x07')
    dataset = streaming.StreamingDataset(remote=remote, local=str(tmp_path / 'local'), validate_hash='sha1',
                                         download_retry=0)
    with pytest.raises(ValueError, match='Checksum failure'):
        dataset[0]


# Situations where the core raises its own error class, which also derives from the reference's type.

def test_corrupt_index_is_json_decode_error(tmp_path: Any) -> None:
    (tmp_path / 'index.json').write_text('{"shards": [')
    with pytest.raises(json.JSONDecodeError, match='empty or corrupted'):
        streaming.StreamingDataset(local=str(tmp_path))


def test_missing_local_index_is_runtime_error(tmp_path: Any) -> None:
    with pytest.raises(RuntimeError, match='does not exist either'):
        streaming.StreamingDataset(local=str(tmp_path / 'nothing'))


def test_wrong_column_value_is_attribute_error(tmp_path: Any) -> None:
    with streaming.MDSWriter(out=str(tmp_path / 'w'), columns={'x': 'bytes'}) as writer:
        with pytest.raises(AttributeError):
            writer.write({'x': 'not bytes'})
        writer.write({'x': b'ok'})
    for cls, out in ((streaming.JSONWriter, 'j'), (streaming.CSVWriter, 'c')):
        with cls(out=str(tmp_path / out), columns={'x': 'float'}) as writer:
            with pytest.raises(AttributeError) as info:
                writer.write({'x': 1})
            assert isinstance(info.value, errors.ColumnTypeError) and 'an int is not a float' in str(info.value)
            writer.write({'x': 1.5})


def test_unknown_scheme_is_value_error_with_the_reference_phrase() -> None:
    from streaming_core.storage.facade import get_backend
    with pytest.raises(ValueError, match='Unsupported remote path: foo://bucket/x') as info:
        get_backend('foo://bucket/x')
    assert isinstance(info.value, errors.UnknownSchemeError) and 'Installed storage scheme names' in str(info.value)


def test_dataset_with_unsupported_remote_is_value_error(tmp_path: Any) -> None:
    with pytest.raises(ValueError):
        streaming.StreamingDataset(remote='foo://bucket/x', local=str(tmp_path / 'l'))


def test_torch_is_real() -> None:
    assert torch.utils.data.get_worker_info() is None
