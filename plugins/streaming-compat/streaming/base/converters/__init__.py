"""``streaming.base.converters``: Spark DataFrame to MDS (:func:`dataframe_to_mds`, streaming-core's) and the schema
helpers around it. pyspark is imported only when these are called."""

from __future__ import annotations

from typing import Any

from streaming_core.tools.convert import spark_types as _types
from streaming_core.tools.spark import dataframe_to_mds

__all__ = ['dataframe_to_mds', 'infer_dataframe_schema', 'is_json_compatible', 'SPARK_TO_MDS']


def infer_dataframe_schema(dataframe: Any, user_defined_cols: dict[str, str] | None = None) -> dict[str, str] | None:
    """The MDS columns of a Spark DataFrame.

    Without ``user_defined_cols``: ``{column: encoding}`` inferred from the schema. With them: they are checked
    against the schema and ``None`` is returned.

    Raises:
        ValueError: a column type with no MDS encoding, or a user encoding its column's type cannot provide.
    """
    if user_defined_cols is not None:
        _types.check_spark_columns(dataframe.schema, user_defined_cols)
        return None
    return _types.infer_spark_columns(dataframe.schema)


def is_json_compatible(data_type: Any) -> bool:
    """Whether a Spark type can be stored in a ``json`` column: a string, number, boolean or null, or a Struct,
    Array or Map built from them (a Map's keys must be strings: the reference let JSON turn other keys into
    strings)."""
    return _types.json_compatible(data_type)


def _spark_to_mds() -> dict[Any, str]:
    import pyspark.sql.types as t
    return {t.ByteType(): 'uint8', t.ShortType(): 'uint16', t.IntegerType(): 'int32', t.LongType(): 'int64',
            t.FloatType(): 'float32', t.DoubleType(): 'float64', t.DecimalType(): 'str_decimal',
            t.StringType(): 'str', t.BinaryType(): 'bytes'}


def __getattr__(name: str) -> Any:
    if name == 'SPARK_TO_MDS':  # built on first use: it needs pyspark
        value = _spark_to_mds()
        globals()[name] = value
        return value
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


# The reference's submodule of the same name: imported here, then the function's name bound again, so that both
# ``from streaming.base.converters import dataframe_to_mds`` and the submodule path give the function.
import streaming.base.converters.dataframe_to_mds  # noqa: E402,F401
from streaming_core.tools.spark import dataframe_to_mds  # noqa: E402,F811
