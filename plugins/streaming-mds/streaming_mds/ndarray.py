"""The ``ndarray[:dtype[:shape]]`` MDS encoding (spec 4.2).

Serialised form: ``[dtype code byte, only if the dtype is not static] [shape header, only if the shape is not
static] [values in C order, little-endian]``. The shape header is one byte ``(ndim << 2) | k`` followed by ``ndim``
dimensions of the smallest unsigned type (``k``: 0 = uint8, 1 = uint16, 2 = uint32, 3 = uint64) whose range holds
the largest dimension.

Unlike the reference, arrays in big-endian (or other non-native) byte order are converted to little-endian before
they are written, so they decode to the same values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streaming_core.plugin_api import CodecError
from streaming_mds.encodings import EncodingTypeError, short_repr

__all__ = ['NDArray', 'DTYPE_CODES', 'CODE_DTYPES']

#: dtype name -> the code byte of the dynamic form.
DTYPE_CODES = {'uint8': 8, 'int8': 9, 'uint16': 16, 'int16': 17, 'float16': 18, 'uint32': 32, 'int32': 33,
               'float32': 34, 'uint64': 64, 'int64': 65, 'float64': 66}
CODE_DTYPES = {code: np.dtype(name).newbyteorder('<') for name, code in DTYPE_CODES.items()}
_SHAPE_TYPES = ('<u1', '<u2', '<u4', '<u8')
_NATIVE_LITTLE = np.little_endian


class NDArray:
    """An ``ndarray`` codec; ``args`` is ``None``/``''``, ``'<dtype>'`` or ``'<dtype>:<d0>,<d1>,...'``.

    Attributes:
        dtype: The static dtype name or ``None``.
        shape: The static shape or ``None``.
        size: ``prod(shape) * itemsize`` when both are static, else ``None``.
    """

    unsafe = False

    def __init__(self, args: str | None = None) -> None:
        self.dtype: str | None = None
        self.shape: tuple[int, ...] | None = None
        self.size: int | None = None
        if args:
            dtype, _, shape_text = args.partition(':')
            if dtype not in DTYPE_CODES:
                raise CodecError(f'MDS encoding ndarray:{args}: unsupported dtype {dtype!r}; expected one of '
                                 f'{", ".join(DTYPE_CODES)}.')
            self.dtype = dtype
            if shape_text:
                try:
                    shape = tuple(int(d) for d in shape_text.split(','))
                except ValueError:
                    raise CodecError(f'MDS encoding ndarray:{args}: the shape must be comma-separated integers '
                                     f'such as 32,32,3; got {shape_text!r}.') from None
                if not shape or any(d < 1 for d in shape) or len(shape) > 63:
                    raise CodecError(f'MDS encoding ndarray:{args}: every dimension must be at least 1 and there '
                                     f'are at most 63 of them; got {shape}.')
                self.shape = shape
                self.size = math.prod(shape) * np.dtype(dtype).itemsize
        self._le = np.dtype(self.dtype).newbyteorder('<') if self.dtype else None
        # The fast path of encode: a native little-endian array of exactly the static dtype and shape.
        self._fast = np.dtype(self.dtype) if self.size is not None and _NATIVE_LITTLE else None
        self.name = 'ndarray' + (f':{args}' if args else '')

    def __repr__(self) -> str:
        return f'<MDS encoding {self.name}>'

    # ------------------------------------------------------------------------------------------------------------
    def encode(self, obj: Any) -> bytes:
        """Serialise an array (see the module docstring)."""
        fast = self._fast
        if fast is not None and obj.__class__ is np.ndarray and obj.shape == self.shape and obj.dtype == fast:
            return obj.tobytes()
        if not isinstance(obj, np.ndarray):
            raise EncodingTypeError(f'MDS encoding {self.name!r} takes a numpy ndarray, got {type(obj).__name__}: '
                                    f'{short_repr(obj)}.', 'a numpy ndarray')
        if obj.ndim == 0:
            raise CodecError('Attempting to encode a scalar with NDArray encoding; wrap it in an array of shape '
                             '(1,) or use a scalar encoding such as \'int32\'.')
        if obj.size == 0:
            raise CodecError(f'Attempting to encode a numpy array with 0 elements (shape {obj.shape}); the ndarray '
                             f'encoding needs every dimension to be at least 1.')
        name = obj.dtype.name
        if name not in DTYPE_CODES:
            raise CodecError(f'MDS encoding {self.name!r} cannot store dtype {obj.dtype}; supported dtypes are '
                             f'{", ".join(DTYPE_CODES)}.')
        if self.dtype is not None and name != self.dtype:
            raise CodecError(f'Wrong dtype: MDS encoding {self.name!r} expects {self.dtype}, got {name}.')
        if self.shape is not None and obj.shape != self.shape:
            raise CodecError(f'Wrong shape: MDS encoding {self.name!r} expects {self.shape}, got {obj.shape}.')
        if obj.dtype.byteorder == '>' or (obj.dtype.byteorder == '=' and not _NATIVE_LITTLE):
            obj = obj.astype(obj.dtype.newbyteorder('<'))
        values = obj.tobytes()
        if self.dtype is not None and self.shape is not None:
            return values
        head = b'' if self.dtype is not None else bytes((DTYPE_CODES[name],))
        if self.shape is None:
            head += _shape_header(obj.shape)
        return head + values

    def decode(self, data: bytes | memoryview) -> np.ndarray:
        """A new, writable array holding the values of ``data`` (one copy of the values, which costs about as much
        as building a read-only view for small arrays; torch's ``default_collate`` warns on read-only arrays)."""
        pos = 0
        if self.dtype is None:
            if not len(data):
                raise CodecError('ndarray data is empty; expected a dtype byte.')
            dtype = CODE_DTYPES.get(data[0])
            if dtype is None:
                raise CodecError(f'ndarray data has an unknown dtype code {data[0]}.')
            pos = 1
        else:
            dtype = self._le
        if self.shape is None:
            if len(data) <= pos:
                raise CodecError('ndarray data is truncated before its shape header.')
            ndim, kind = data[pos] >> 2, data[pos] & 3
            shape_dtype = np.dtype(_SHAPE_TYPES[kind])
            end = pos + 1 + ndim * shape_dtype.itemsize
            if len(data) < end:
                raise CodecError('ndarray data is truncated inside its shape header.')
            shape = tuple(np.frombuffer(data, shape_dtype, count=ndim, offset=pos + 1).tolist())
            pos = end
        else:
            shape = self.shape
        count = math.prod(shape)
        if len(data) - pos != count * dtype.itemsize:
            raise CodecError(f'ndarray data holds {len(data) - pos} value bytes, but shape {shape} of {dtype.name} '
                             f'needs {count * dtype.itemsize}.')
        out = np.empty(shape, dtype)
        if count:
            memoryview(out).cast('B')[:] = memoryview(data)[pos:]
        return out


def _shape_header(shape: tuple[int, ...]) -> bytes:
    if len(shape) > 63:
        raise CodecError(f'The ndarray encoding stores at most 63 dimensions, got {len(shape)}.')
    biggest = max(shape)
    for kind, type_ in enumerate(_SHAPE_TYPES):
        if biggest < 1 << (8 << kind):
            return bytes(((len(shape) << 2) | kind,)) + np.asarray(shape, type_).tobytes()
    raise CodecError(f'ndarray dimension {biggest} is too large.')
