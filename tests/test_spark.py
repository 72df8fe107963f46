"""dataframe_to_mds on a real local Spark session: type mapping, partitions merged in order, checks, pains fixed."""

from __future__ import annotations

import json
import os
import sys
from decimal import Decimal

import numpy as np
import pytest

from tests.deps import require

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def spark():
    require('pyspark')
    require('pandas')
    require('pyarrow')
    os.environ.setdefault('PYSPARK_PYTHON', sys.executable)
    os.environ.setdefault('PYSPARK_DRIVER_PYTHON', sys.executable)
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master('local[2]').appName('streaming-core-tests')
               .config('spark.ui.enabled', 'false').config('spark.sql.shuffle.partitions', '2')
               .config('spark.driver.memory', '1g').getOrCreate())
    session.sparkContext.setLogLevel('ERROR')
    yield session
    session.stop()


def _schema():
    from pyspark.sql import types as T
    return T.StructType([
        T.StructField('id', T.IntegerType(), False),
        T.StructField('big', T.LongType(), True),
        T.StructField('small', T.ShortType(), True),
        T.StructField('tiny', T.ByteType(), True),
        T.StructField('f', T.FloatType(), True),
        T.StructField('d', T.DoubleType(), True),
        T.StructField('s', T.StringType(), True),
        T.StructField('b', T.BinaryType(), True),
        T.StructField('dec', T.DecimalType(10, 3), True),
        T.StructField('arr', T.ArrayType(T.IntegerType(), containsNull=False), False),  # MS#870
        T.StructField('farr', T.ArrayType(T.DoubleType(), True), True),
        T.StructField('grid', T.ArrayType(T.ArrayType(T.LongType(), False), False), False),  # MS#736: 2-D
    ])


def _rows(n=60):
    return [(i, i * 10**10, i % 300, i % 100, i / 4, i / 3, f'row-{i}', bytes([i % 256]) * (i % 7),
             Decimal(i) / Decimal(8), [i, i + 1, i + 2], [float(i)] * (1 + i % 4), [[i, i + 1], [i + 2, i + 3]])
            for i in range(n)]


@pytest.fixture(scope='module')
def frame(spark):
    return spark.createDataFrame(_rows(), _schema()).repartition(4).sortWithinPartitions('id')


def test_types_roundtrip_and_sample_order(frame, tmp_path):
    from streaming_core import StreamingDataset
    from streaming_core.tools.spark import dataframe_to_mds
    out = str(tmp_path / 'out')
    local, remote = dataframe_to_mds(frame, mds_kwargs={'out': out, 'size_limit': 1 << 11, 'hashes': ['sha1']})
    assert (local, remote) == (out, '')
    index = json.loads(open(os.path.join(out, 'index.json')).read())
    entry = index['shards'][0]
    columns = dict(zip(entry['column_names'], entry['column_encodings']))
    assert columns == {'id': 'int32', 'big': 'int64', 'small': 'uint16', 'tiny': 'uint8', 'f': 'float32',
                       'd': 'float64', 's': 'str', 'b': 'bytes', 'dec': 'str_decimal', 'arr': 'ndarray:int32',
                       'farr': 'ndarray:float64', 'grid': 'ndarray:int64'}
    assert entry['compression'] == 'zstd'  # the reference's default
    partitions = sorted({e['raw_data']['basename'].split('/')[0] for e in index['shards']})
    assert len(partitions) > 1 and all(len(p) == 5 and p.isdigit() for p in partitions)
    # The merged order is the DataFrame's partition order, each partition in its own row order.
    expected_order = [row['id'] for row in frame.collect()]
    dataset = StreamingDataset(local=out, batch_size=1)
    got = [dataset[i] for i in range(dataset.num_samples)]
    assert [int(s['id']) for s in got] == expected_order
    by_id = {int(s['id']): s for s in got}
    for row in _rows():
        s = by_id[row[0]]
        assert int(s['big']) == row[1] and int(s['small']) == row[2] and int(s['tiny']) == row[3]
        assert float(s['f']) == pytest.approx(row[4]) and float(s['d']) == row[5]
        assert s['s'] == row[6] and s['b'] == row[7] and s['dec'] == row[8]
        assert s['arr'].dtype == np.int32 and s['arr'].tolist() == row[9]
        assert s['farr'].tolist() == row[10]
        assert s['grid'].shape == (2, 2) and s['grid'].tolist() == row[11]


def test_user_columns_checked_against_schema(frame, tmp_path):
    from streaming_core.tools.spark import dataframe_to_mds
    with pytest.raises(ValueError, match="'missing' .*not in the DataFrame"):
        dataframe_to_mds(frame, mds_kwargs={'out': str(tmp_path / 'a'), 'columns': {'missing': 'int'}})
    with pytest.raises(ValueError, match="'s' has Spark type string, which cannot be written as 'int32'"):
        dataframe_to_mds(frame, mds_kwargs={'out': str(tmp_path / 'b'), 'columns': {'s': 'int32'}})
    with pytest.raises(ValueError, match="expected ndarray:int32"):
        dataframe_to_mds(frame, mds_kwargs={'out': str(tmp_path / 'c'), 'columns': {'arr': 'ndarray:float32:3'}})
    with pytest.raises(ValueError, match='"json" needs strings, numbers'):
        dataframe_to_mds(frame, mds_kwargs={'out': str(tmp_path / 'd'), 'columns': {'b': 'json'}})
    scalar = str(tmp_path / 'scalar-json')  # a scalar column as json, as the reference allows
    dataframe_to_mds(frame, mds_kwargs={'out': scalar, 'columns': {'id': 'json', 's': 'json'}, 'compression': None})
    from streaming_core import LocalDataset
    first = LocalDataset(scalar)[0]
    assert isinstance(first['id'], int) and isinstance(first['s'], str)
    # A subset with compatible encodings (and the ndarray:dtype:shape form) is fine.
    out = str(tmp_path / 'ok')
    dataframe_to_mds(frame, mds_kwargs={'out': out, 'columns': {'id': 'int', 'arr': 'ndarray:int32:3',
                                                                'b': 'bytes'}, 'compression': None})
    from streaming_core import LocalDataset
    data = LocalDataset(out)
    assert len(data) == 60 and sorted(data[0]) == ['arr', 'b', 'id']


def test_checks_and_unsupported_types(spark, frame, tmp_path):
    from pyspark.sql import types as T

    from streaming_core.tools.spark import dataframe_to_mds
    with pytest.raises(ValueError, match='out'):
        dataframe_to_mds(frame, mds_kwargs={})
    empty = spark.createDataFrame([], _schema())
    with pytest.raises(ValueError, match='Empty'):
        dataframe_to_mds(empty, mds_kwargs={'out': str(tmp_path / 'e')})
    flags = spark.createDataFrame([(1, True)], T.StructType([T.StructField('id', T.IntegerType()),
                                                            T.StructField('flag', T.BooleanType())]))
    with pytest.raises(ValueError, match="'flag': Spark type boolean is not supported"):
        dataframe_to_mds(flags, mds_kwargs={'out': str(tmp_path / 'f')})
    busy = tmp_path / 'busy'
    busy.mkdir()
    (busy / 'x').write_text('x')
    with pytest.raises(FileExistsError, match='not empty'):
        dataframe_to_mds(frame, mds_kwargs={'out': str(busy)})


def test_nulls_and_ragged_arrays_are_named(spark, tmp_path):
    from pyspark.sql import types as T

    from streaming_core.tools.spark import dataframe_to_mds
    schema = T.StructType([T.StructField('id', T.IntegerType()), T.StructField('v', T.IntegerType())])
    nulls = spark.createDataFrame([(1, 5), (2, None)], schema).coalesce(1)
    with pytest.raises(Exception, match=r"partition 0, row 1: Column 'v' holds a null"):
        dataframe_to_mds(nulls, mds_kwargs={'out': str(tmp_path / 'n')})
    inner = T.StructType([T.StructField('a', T.ArrayType(T.ArrayType(T.IntegerType())))])
    inner_null = spark.createDataFrame([([[1, 2], [3, 4]],), ([[1, None], [3, 4]],)], inner).coalesce(1)
    with pytest.raises(Exception, match=r"partition 0, row 1: Column 'a'.*holds a null inside the array"):
        dataframe_to_mds(inner_null, mds_kwargs={'out': str(tmp_path / 'i'), 'columns': {'a': 'ndarray:int32'}})
    # conversion.md: Spark hands a float column's null to Python as NaN (as for the reference): written as NaN.
    floats = spark.createDataFrame([(1, 0.5), (2, None)], 'id int, f double').coalesce(1)
    dataframe_to_mds(floats, mds_kwargs={'out': str(tmp_path / 'f'), 'compression': None})
    from streaming_core import LocalDataset
    read = LocalDataset(str(tmp_path / 'f'))
    assert read[0]['f'] == 0.5 and np.isnan(read[1]['f'])
    ragged_schema = T.StructType([T.StructField('g', T.ArrayType(T.ArrayType(T.IntegerType())))])
    ragged = spark.createDataFrame([([[1, 2], [3]],)], ragged_schema).coalesce(1)
    with pytest.raises(Exception, match='same length'):
        dataframe_to_mds(ragged, mds_kwargs={'out': str(tmp_path / 'r')})


def test_udf_and_no_merge(frame, tmp_path):
    from streaming_core.tools.spark import dataframe_to_mds

    def doubled(pdf, factor):
        for value in pdf['id'].tolist():
            yield {'x': int(value) * factor}

    with pytest.raises(ValueError, match='columns'):
        dataframe_to_mds(frame, mds_kwargs={'out': str(tmp_path / 'u0')}, udf_iterable=doubled)
    out = str(tmp_path / 'u')
    dataframe_to_mds(frame, merge_index=False, mds_kwargs={'out': out, 'columns': {'x': 'int'}},
                     udf_iterable=doubled, udf_kwargs={'factor': 3})
    assert not os.path.exists(os.path.join(out, 'index.json'))
    from streaming_core import LocalDataset
    from streaming_core.writing.merge import merge_index
    merge_index(out)  # the root form finds the zero-padded partitions in order
    data = LocalDataset(out)
    assert sorted(int(data[i]['x']) for i in range(len(data))) == [3 * i for i in range(60)]


def test_remote_output_through_storage_plugin(frame, tmp_path):
    """A (local, remote) output: the remote is a file:// URL (the local storage plugin), keep_local=False."""
    from streaming_core import StreamingDataset
    from streaming_core.tools.spark import dataframe_to_mds
    remote_dir = tmp_path / 'remote'
    local = str(tmp_path / 'local')
    result = dataframe_to_mds(frame, mds_kwargs={'out': (local, f'file://{remote_dir}'), 'keep_local': False})
    assert result == (local, f'file://{remote_dir}')
    assert os.path.isfile(remote_dir / 'index.json') and not os.path.exists(local)
    dataset = StreamingDataset(remote=f'file://{remote_dir}', local=str(tmp_path / 'cache'), batch_size=1)
    assert sorted(int(dataset[i]['id']) for i in range(dataset.num_samples)) == list(range(60))


def test_a_failed_exist_ok_rerun_leaves_no_index_over_rewritten_shards(spark, tmp_path):
    """Run 1 writes (local, remote); run 2 with exist_ok=True fails midway (a null). The remote must not keep run
    1's index.json over shards run 2 rewrote (it read 225 old and 175 new samples, with no error): the index is
    emptied before any task starts, so readers find no samples until a run succeeds."""
    from streaming_core import StreamingDataset
    from streaming_core.tools.spark import dataframe_to_mds
    remote = str(tmp_path / 'remote')
    first = spark.createDataFrame([(i, i) for i in range(400)], 'id int, v int').repartition(4)
    dataframe_to_mds(first, mds_kwargs={'out': (str(tmp_path / 'l1'), remote), 'compression': None})
    assert len(StreamingDataset(remote=remote, local=str(tmp_path / 'c1'), batch_size=1)) == 400
    rows = [(1000 + i, i if i != 350 else None) for i in range(400)]
    second = spark.createDataFrame(rows, 'id int, v int').repartition(4)
    with pytest.raises(Exception, match='holds a null'):
        dataframe_to_mds(second, mds_kwargs={'out': (str(tmp_path / 'l2'), remote), 'exist_ok': True,
                                             'compression': None})
    index = json.load(open(os.path.join(remote, 'index.json')))
    assert index['shards'] == []


def test_a_dataframe_read_from_under_out_is_not_deleted(spark, tmp_path):
    """exist_ok=True clears ``out`` first; a DataFrame read lazily from a file under it would lose its source."""
    from streaming_core.tools.spark import dataframe_to_mds
    out = tmp_path / 'ds'
    (out / 'raw').mkdir(parents=True)
    source = out / 'raw' / 'rows.json'
    source.write_text('\n'.join(json.dumps({'id': i}) for i in range(10)))
    frame = spark.read.json(str(source))
    for exist_ok in (True, False):
        with pytest.raises(ValueError, match='holds a file the DataFrame reads'):
            dataframe_to_mds(frame, mds_kwargs={'out': str(out), 'exist_ok': exist_ok})
    assert source.exists()
