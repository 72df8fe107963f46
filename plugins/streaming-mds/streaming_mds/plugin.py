"""Hook implementations of streaming-mds: the ``mds`` shard format and its 28 column encodings."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl
from streaming_mds.encodings import (
    JSON,
    SCALAR_TYPES,
    Bytes,
    Int,
    Pickle,
    Str,
    StrDecimal,
    StrFloat,
    StrInt,
    scalar_factory,
)
from streaming_mds.images import JPEG, PIL, PNG, JPEGArray, list_factory
from streaming_mds.ndarray import NDArray
from streaming_mds.reader import MDSFormat


@hookimpl
def register_codecs(registry: RegistryView) -> None:
    """Register the reference's 28 MDS encodings (factories taking the text after the first ``:``)."""
    for codec in (Bytes, Str, Int, StrInt, StrFloat, StrDecimal, PIL, JPEG, PNG, Pickle, JSON):
        registry.add(codec.name, codec)
    for name in SCALAR_TYPES:
        registry.add(name, scalar_factory(name))
    registry.add('ndarray', NDArray)
    registry.add('jpeg_array', JPEGArray)
    registry.add('jpegarray', JPEGArray)
    for element in (PIL, JPEG, PNG):
        registry.add(f'list[{element.name}]', list_factory(element))


@hookimpl
def register_shard_formats(registry: RegistryView) -> None:
    """Register the ``mds`` format."""
    registry.add('mds', MDSFormat())
