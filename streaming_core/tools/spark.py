"""``dataframe_to_mds``: write a Spark DataFrame as an MDS dataset, one partition per Spark task, merged in order.

Same signature, checks and defaults as mosaicml-streaming 0.13 (spec formats.md 7.5): ``compression`` defaults to
``'zstd'``, ``mds_kwargs['out']`` is required, a non-empty output is refused unless ``exist_ok``, columns are
inferred from the schema or checked against it (see :mod:`streaming_core.tools.convert.spark_types`), a UDF may produce
the samples instead (then ``columns`` is required and not checked). Differences, on purpose:

* each task writes ``<out>/<partition id>`` (zero-padded, 5 digits or more) instead of ``<out>/<task attempt id>``:
  a retried task replaces its own earlier attempt, and ``merge_index(out)`` on the result finds the partitions in
  DataFrame order; empty partitions write nothing (keep ``spark.speculation`` off: two concurrent attempts of one
  partition would share its directory);
* the merged index lists partitions in DataFrame partition order, so the dataset reads back in the DataFrame's
  order;
* non-nullable arrays and nested (2-D) numeric arrays work; unsupported types and nulls raise a ``ValueError`` that
  names the column;
* when ``merge_index`` is true the function checks, before returning, that the merged ``index.json`` exists where
  it says (MS#873), and any failure raises instead of leaving a dataset without an index;
* local copies are not forced: with a remote, tasks honour ``keep_local`` and the merge reads the partition
  indexes from the remote when their local copies are gone.

The MDS writer is found by name in the ``format`` registry; the output may be any storage plugin's URL.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streaming_core.errors import DirectoryNotEmptyError, StreamingError
from streaming_core.storage.redact import redact_repr, redact_url

__all__ = ['dataframe_to_mds']

_RESULT_SCHEMA = 'partition long, name string, samples long, shards long'


def _split_out(out: Any) -> tuple[str, str | None, bool]:
    """``(local, remote or None, local is a temporary directory we made)``."""
    from streaming_core.storage.facade import is_remote, local_path
    if isinstance(out, str) and out:
        if is_remote(out):
            return tempfile.mkdtemp(prefix='streaming-spark-'), out.rstrip('/'), True
        return local_path(out), None, False
    if isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(x, str) and x for x in out):
        if is_remote(out[0]):
            raise ValueError(f'Invalid `out` argument: the first element of {redact_repr(tuple(out))} must be a local '
                             f'directory.')
        return local_path(out[0]), out[1].rstrip('/'), False
    raise ValueError(f'Invalid `out` argument: {redact_repr(out)}. Give a directory, a URL or a (local, remote) '
                     f'tuple.')


def _check_output(local: str, remote: str | None, temp: bool, exist_ok: bool, options: dict[str, Any],
                  inputs: list[str]) -> None:
    from streaming_core.common.paths import is_within
    from streaming_core.storage.facade import exists, join, local_path
    if not temp and os.path.isdir(local) and os.listdir(local):
        inside = next((path for path in inputs if is_within(local_path(path), local)), None)
        if inside is not None:
            raise ValueError(f'The output directory {local} holds a file the DataFrame reads ({inside}): writing '
                             f'there would {"delete" if exist_ok else "mix with"} it. Write to another directory.')
        if not exist_ok:
            raise DirectoryNotEmptyError(
                f'Directory is not empty: {local}. Pass exist_ok=True in mds_kwargs to replace its '
                f'contents, or choose an empty directory.')
        shutil.rmtree(local)
    if remote and exists(join(remote, 'index.json'), timeout=60, options=options):
        if not exist_ok:
            raise DirectoryNotEmptyError(f'The remote output already holds a dataset: '
                                         f'{redact_url(join(remote, "index.json"))}. Pass exist_ok=True in mds_kwargs '
                                         f'to overwrite it.')
        from streaming_core.writing.writer import upload_empty_index  # before any task overwrites a shard
        upload_empty_index(join(remote, 'index.json'), timeout=60, retries=2, options=options)


def _input_files(dataframe: Any) -> list[str]:
    """The local files a DataFrame reads (``inputFiles()``; none when Spark cannot tell)."""
    try:
        files = dataframe.inputFiles()
    except Exception:  # noqa: BLE001 (a DataFrame of another origin)
        return []
    return [path for path in files if path.startswith('file:') or '://' not in path]


def _check_writer(columns: dict[str, str], writer_kwargs: dict[str, Any]) -> None:
    """Build the writer once on the driver (into a scratch directory) so bad arguments fail here, clearly, instead
    of inside every Spark task."""
    from streaming_core.machinery.lookup import get_registry
    writer_cls = get_registry('format').get('mds').writer
    with tempfile.TemporaryDirectory(prefix='streaming-spark-check-') as scratch:
        local_only = {key: value for key, value in writer_kwargs.items() if key != 'storage_options'}
        writer_cls(out=os.path.join(scratch, 'out'), columns=columns, **local_only).finish()


def _records(pdf: Any, plan: list[tuple[str, Callable[[Any], Any]]]) -> Iterator[dict[str, Any]]:
    """The samples of one pandas batch, converted column by column."""
    columns = [pdf[name].tolist() if pdf[name].dtype != object else list(pdf[name]) for name, _ in plan]
    for row in zip(*columns):
        yield {name: convert(value) for (name, convert), value in zip(plan, row)}


def _task(local: str, remote: str | None, width: int, columns: dict[str, str], writer_kwargs: dict[str, Any],
          udf: Callable[..., Iterable[dict[str, Any]]] | None, udf_kwargs: dict[str, Any]) -> Callable[..., Any]:
    """The function ``mapInPandas`` runs per partition (pickled to the executors)."""
    def write_partition(batches: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd
        from pyspark import TaskContext

        from streaming_core.machinery.lookup import get_registry
        from streaming_core.storage.facade import join
        from streaming_core.tools.convert.spark_types import value_converter
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        name = str(partition).zfill(width)
        out: Any = (os.path.join(local, name), join(remote, name)) if remote else os.path.join(local, name)
        plan = [(column, value_converter(encoding, column)) for column, encoding in columns.items()]
        writer = None
        count = 0
        try:
            for pdf in batches:
                samples = iter(udf(pdf, **udf_kwargs) if udf is not None else _records(pdf, plan))
                while True:
                    try:
                        sample = next(samples)
                    except StopIteration:
                        break
                    except (TypeError, ValueError) as err:  # a value _records could not convert (a null...)
                        raise ValueError(f'dataframe_to_mds: partition {partition}, row {count}: {err}') from err
                    if writer is None:
                        writer_cls = get_registry('format').get('mds').writer
                        writer = writer_cls(out=out, columns=columns, **writer_kwargs)
                    try:
                        writer.write(sample)
                    except (TypeError, ValueError) as err:
                        raise ValueError(f'dataframe_to_mds: partition {partition}, row {count}: {err}') from err
                    count += 1
        except BaseException:  # commit nothing of a partial write; release the output
            if writer is not None:
                writer.abandon()
            raise
        if writer is not None:
            writer.finish()
            yield pd.DataFrame({'partition': [partition], 'name': [name], 'samples': [count],
                                'shards': [len(writer.shards)]})
    return write_partition


def dataframe_to_mds(dataframe: Any, merge_index: bool = True, mds_kwargs: dict[str, Any] | None = None,
                     udf_iterable: Callable[..., Iterable[dict[str, Any]]] | None = None,
                     udf_kwargs: dict[str, Any] | None = None) -> tuple[str, str]:
    """Write ``dataframe`` as MDS shards, one writer per Spark partition, then merge the partition indexes.

    Args:
        dataframe: A non-empty ``pyspark.sql.DataFrame``.
        merge_index: Merge the partition indexes into ``<out>/index.json`` (default True).
        mds_kwargs: The writer's arguments: ``out`` (required: a directory, a URL, or ``(local, remote)``),
            ``columns`` (default: inferred from the schema), ``keep_local``, ``compression`` (default ``'zstd'``),
            ``hashes``, ``size_limit``, ``exist_ok``, ``storage_options``, ``progress_bar``, ``max_workers``...
        udf_iterable: ``udf_iterable(pandas_batch, **udf_kwargs)`` yielding sample dicts, instead of one sample
            per row (``columns`` is then required).
        udf_kwargs: Keyword arguments for ``udf_iterable``.

    Returns:
        ``(local, remote)``: the local directory and the remote URL (``''`` when there is none). With only a
        remote ``out``, the local directory is a temporary one, removed at the end unless ``keep_local=True``.

    Raises:
        ValueError: an empty DataFrame, no ``out``, unsupported column types, columns that do not fit the schema,
            nulls, ragged nested arrays, a missing ``columns`` with a UDF.
        FileExistsError: a non-empty output without ``exist_ok``.
    """
    from streaming_core.storage.facade import exists, join
    from streaming_core.tools.convert.spark_types import check_spark_columns, infer_spark_columns
    from streaming_core.writing.merge import merge_index as do_merge
    if dataframe is None or dataframe.isEmpty():
        raise ValueError('Input dataframe is None or Empty!')
    kwargs = dict(mds_kwargs or {})
    if 'out' not in kwargs or not kwargs['out']:
        raise ValueError("`out` and `columns` need to be specified in `mds_kwargs`: mds_kwargs['out'] is missing.")
    out = kwargs.pop('out')
    columns = kwargs.pop('columns', None)
    keep_local_given = 'keep_local' in kwargs
    keep_local = bool(kwargs.pop('keep_local', False))
    kwargs.setdefault('compression', 'zstd')
    exist_ok = bool(kwargs.pop('exist_ok', False))
    options = dict(kwargs.get('storage_options') or {})
    udf_kwargs = dict(udf_kwargs or {})
    if udf_iterable is not None:
        if not columns:
            raise ValueError('When udf_iterable is given, mds_kwargs["columns"] must be given too (the UDF\'s '
                             'output cannot be inferred).')
        columns = dict(columns)
    elif columns:
        columns = dict(columns)
        check_spark_columns(dataframe.schema, columns)
    else:
        columns = infer_spark_columns(dataframe.schema)
    local, remote, temp = _split_out(out)
    _check_output(local, remote, temp, exist_ok, options, _input_files(dataframe))
    os.makedirs(local, exist_ok=True)
    width = max(5, len(str(max(dataframe.rdd.getNumPartitions() - 1, 0))))
    writer_kwargs = {**kwargs, 'keep_local': keep_local or not remote, 'exist_ok': True}
    _check_writer(columns, writer_kwargs)
    task = _task(local, remote, width, columns, writer_kwargs, udf_iterable, udf_kwargs)
    rows = sorted(dataframe.mapInPandas(task, _RESULT_SCHEMA).collect(), key=lambda row: row['partition'])
    if not rows:
        raise StreamingError('dataframe_to_mds: no partition wrote any sample, although the DataFrame is not empty.')
    if merge_index:
        sources: list[Any] = []
        for row in rows:
            part_local = os.path.join(local, row['name'], 'index.json')
            sources.append((part_local, join(remote, row['name'], 'index.json')) if remote else part_local)
        where = do_merge(sources, (local, remote) if remote else local, keep_local=True, storage_options=options)
        found = exists(where, timeout=60, options=options) if remote else os.path.isfile(where)
        if not found:
            raise StreamingError(f'dataframe_to_mds: the merged index {redact_url(where)} is missing after the merge.')
    if remote and (temp and not keep_local or keep_local_given and not keep_local):
        shutil.rmtree(local, ignore_errors=True)
    return local, remote or ''
