"""Decoding litdata items: one decoder per ``data_format`` name, litdata's compact nested encoding of JSON leaves,
and the pytree ``data_spec`` that puts the leaves back into dicts, lists and tuples.

Written from litdata 0.2.76's on-disk layout (checked against files its ``optimize`` wrote). Values come back as
litdata returns them: ``int``, ``float``, ``bool``, ``str``, ``bytes``, NumPy arrays, torch tensors, PIL images
(``pil``), and for ``jpeg`` a PIL image of the JPEG (litdata gives a tensor of the same pixels when torchvision is
installed). A data format we do not decode is refused by name, never misread.
"""

from __future__ import annotations

import io
import json
import struct
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from streaming_core.plugin_api import IndexFormatError

__all__ = ['decoder', 'nested_loads', 'parse_spec', 'unflatten', 'top_level_keys', 'key_leaves', 'SUPPORTED',
           'Spec']

_U32 = struct.Struct('<I')
_I64 = struct.Struct('<q')
_F64 = struct.Struct('<d')

#: litdata's NumPy dtype indices (``no_header_numpy:N`` and the ``numpy`` header).
_NUMPY = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16, np.float32,
          np.float64, np.complex64, np.complex128, bool, object, bytes, str, np.void]
#: litdata's torch dtype indices, by name (``no_header_tensor:N`` and the ``tensor`` header).
_TORCH = ['float32', 'float32', 'float64', 'float64', 'complex64', 'complex64', 'complex128', 'complex128', 'float16',
          'float16', 'bfloat16', 'uint8', 'int8', 'int16', 'int16', 'int32', 'int32', 'int64', 'int64', 'bool',
          'uint16']

#: The data format names (before any ``:``) this plugin decodes.
SUPPORTED = ('int', 'float', 'bool', 'str', 'text', 'bytes', 'numpy', 'no_header_numpy', 'tensor',
             'no_header_tensor', 'pil', 'jpeg', 'json')


def _numpy_dtype(index: int, where: str) -> Any:
    if not 0 <= index < len(_NUMPY) or _NUMPY[index] in (object, bytes, str, np.void):
        raise IndexFormatError(f'{where}: NumPy dtype index {index} is not a fixed-size numeric dtype.')
    return np.dtype(_NUMPY[index])


def _torch_dtype(index: int, where: str) -> Any:
    import torch
    if not 0 <= index < len(_TORCH):
        raise IndexFormatError(f'{where}: unknown torch dtype index {index}.')
    return getattr(torch, _TORCH[index])


def _numpy_with_header(data: bytes) -> Any:
    dtype_index, rank = struct.unpack_from('<II', data, 0)
    shape = struct.unpack_from(f'<{rank}I', data, 8)
    dtype = _numpy_dtype(dtype_index, 'numpy leaf')
    return np.frombuffer(data[8 + 4 * rank:], dtype=dtype).copy().reshape(shape)


def _tensor_with_header(data: bytes) -> Any:
    import torch
    dtype_index, rank = struct.unpack_from('>II', data, 0)
    shape = struct.unpack_from(f'>{rank}I', data, 8)
    dtype = _torch_dtype(dtype_index, 'tensor leaf')
    body = data[8 + 4 * rank:]
    if not body:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(body), dtype=dtype).reshape(shape)


def _pil(data: bytes) -> Any:
    from PIL import Image
    width, height, mode_size = struct.unpack_from('<III', data, 0)
    mode = data[12:12 + mode_size].decode('utf-8')
    return Image.frombytes(mode, (width, height), data[12 + mode_size:])


def _jpeg(data: bytes) -> Any:
    from PIL import Image
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def decoder(name: str, where: str) -> Callable[[bytes], Any]:
    """The decoder of one ``data_format`` entry (``'int'``, ``'no_header_numpy:10'``...).

    Raises:
        IndexFormatError: a format this plugin does not decode (naming it), or a bad dtype index.
    """
    base, _, arg = name.partition(':')
    simple: dict[str, Callable[[bytes], Any]] = {
        'int': lambda data: _I64.unpack(data)[0], 'float': lambda data: _F64.unpack(data)[0],
        'bool': lambda data: data != b'\x00', 'str': lambda data: data.decode('utf-8'),
        'text': lambda data: data.decode('utf-8'), 'bytes': bytes, 'numpy': _numpy_with_header,
        'tensor': _tensor_with_header, 'pil': _pil, 'jpeg': _jpeg, 'json': nested_loads}
    if base in simple and not arg:
        return simple[base]
    if base == 'no_header_numpy' and arg.isdigit():
        dtype = _numpy_dtype(int(arg), where)
        return lambda data: np.frombuffer(data, dtype=dtype).copy()
    if base == 'no_header_tensor' and arg.isdigit():
        tdtype = _torch_dtype(int(arg), where)

        def tensor(data: bytes) -> Any:
            import torch
            return torch.frombuffer(bytearray(data), dtype=tdtype) if data else torch.empty((0,), dtype=tdtype)
        return tensor
    raise IndexFormatError(f'{where}: the litdata data format {name!r} is not supported by streaming-litdata (it '
                           f'decodes {", ".join(SUPPORTED)}); convert the dataset with litdata or leave that field '
                           f'out.')


def _utf8(raw: bytes, offset: int) -> tuple[str, int]:
    (length,) = _U32.unpack_from(raw, offset)
    start = offset + 4
    return raw[start:start + length].decode('utf-8'), start + length


def _nested_at(raw: bytes, offset: int) -> tuple[Any, int]:
    """One value of litdata's compact nested encoding at ``offset``; ``(value, next offset)``."""
    tag = raw[offset]
    if tag in (0, 1, 2, 3, 4, 5, 6):
        (count,) = _U32.unpack_from(raw, offset + 1)
        start = offset + 5
        if tag == 0:  # JSON text
            return json.loads(raw[start:start + count]), start + count
        if tag == 1:  # list of str
            out = []
            for _ in range(count):
                text, start = _utf8(raw, start)
                out.append(text)
            return out, start
        if tag in (2, 3):  # list of int64 / float64
            values = np.frombuffer(raw[start:start + 8 * count], dtype='<i8' if tag == 2 else '<f8').tolist()
            return values, start + 8 * count
        if tag == 4:  # list of bool
            return [bool(b) for b in raw[start:start + count]], start + count
        if tag == 5:  # dict
            mapping: dict[str, Any] = {}
            for _ in range(count):
                key, start = _utf8(raw, start)
                mapping[key], start = _nested_at(raw, start)
            return mapping, start
        (keys_count,) = _U32.unpack_from(raw, start)  # tag 6: records with one key set
        start += 4
        keys = []
        for _ in range(keys_count):
            key, start = _utf8(raw, start)
            keys.append(key)
        rows: list[dict[str, Any]] = []
        for _ in range(count):
            row: dict[str, Any] = {}
            for key in keys:
                kind = raw[start]
                start += 1
                if kind == 0x10:
                    row[key] = None
                elif kind == 0x11:
                    row[key], start = _utf8(raw, start)
                elif kind == 0x12:
                    row[key] = _I64.unpack_from(raw, start)[0]
                    start += 8
                elif kind == 0x13:
                    row[key] = _F64.unpack_from(raw, start)[0]
                    start += 8
                elif kind == 0x14:
                    row[key] = bool(raw[start])
                    start += 1
                else:
                    raise ValueError(f'unknown nested record tag {kind}')
            rows.append(row)
        return rows, start
    if tag == 7:
        return _utf8(raw, offset + 1)
    if tag == 8:
        return _I64.unpack_from(raw, offset + 1)[0], offset + 9
    if tag == 9:
        return _F64.unpack_from(raw, offset + 1)[0], offset + 9
    if tag == 10:
        return bool(raw[offset + 1]), offset + 2
    if tag == 11:
        return None, offset + 1
    raise ValueError(f'unknown nested tag {tag}')


def nested_loads(data: bytes) -> Any:
    """A ``json`` leaf: litdata's compact nested encoding, or plain JSON text (older files)."""
    raw = bytes(data)
    if not raw or raw[0] > 0x20:
        return json.loads(raw)
    value, _ = _nested_at(raw, 0)
    return value


#: A parsed ``data_spec`` node: ``(type name or None for a leaf, context, children)``.
Spec = tuple[Any, Any, list[Any]]
_CONTAINERS = ('builtins.dict', 'builtins.list', 'builtins.tuple', 'collections.OrderedDict')


def parse_spec(text: str | None, where: str) -> Spec | None:
    """Parse litdata's ``data_spec`` (a serialized pytree spec: ``[1, {"type", "context", "children_spec"}]``).

    Raises:
        IndexFormatError: not a spec, or a container type other than dict, list, tuple and OrderedDict.
    """
    if text is None:
        return None
    try:
        obj = json.loads(text)
        node = obj[1]
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise IndexFormatError(f'{where}: "data_spec" is not a serialized pytree spec ({err}).') from None

    def walk(item: Any) -> Spec:
        kind = item.get('type')
        if kind is not None and kind not in _CONTAINERS:
            raise IndexFormatError(f'{where}: the pytree container {kind!r} in "data_spec" is not supported (dicts, '
                                   f'lists and tuples are).')
        context = json.loads(item['context']) if isinstance(item.get('context'), str) else None
        return kind, context, [walk(child) for child in item.get('children_spec') or []]
    return walk(node)


def count_leaves(spec: Spec | None) -> int:
    """How many leaves a spec holds."""
    if spec is None:
        return 1
    kind, _, children = spec
    return 1 if kind is None else sum(count_leaves(child) for child in children)


def top_level_keys(spec: Spec | None) -> list[str] | None:
    """The keys of the items a spec describes, in order, or None when they are not dicts."""
    if spec is None or spec[0] not in ('builtins.dict', 'collections.OrderedDict') or not isinstance(spec[1], list):
        return None
    return [str(key) for key in spec[1]]


def key_leaves(spec: Spec, keys: list[str]) -> list[tuple[str, int, int, Spec]]:
    """``(key, first leaf, end leaf, the key's spec)`` of each of ``keys`` (top-level keys of a dict ``spec``, see
    :func:`top_level_keys`): the leaves ``[first, end)`` of an item's flat leaf list make up that key's value."""
    _, context, children = spec
    spans: dict[str, tuple[int, int, Spec]] = {}
    position = 0
    for key, child in zip(context, children):
        width = count_leaves(child)
        spans[str(key)] = (position, position + width, child)
        position += width
    return [(key, *spans[key]) for key in keys]


def unflatten(leaves: list[Any], spec: Spec | None) -> Any:
    """Put ``leaves`` back into the containers of ``spec``."""
    if spec is None:
        return leaves[0] if len(leaves) == 1 else leaves
    position = 0

    def build(node: Spec) -> Any:
        nonlocal position
        kind, context, children = node
        if kind is None:
            value = leaves[position]
            position += 1
            return value
        values = [build(child) for child in children]
        if kind == 'builtins.dict':
            return dict(zip(context, values))
        if kind == 'collections.OrderedDict':
            return OrderedDict(zip(context, values))
        return tuple(values) if kind == 'builtins.tuple' else values
    return build(spec)
