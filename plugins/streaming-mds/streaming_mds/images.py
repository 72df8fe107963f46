"""The image MDS encodings: ``pil``, ``jpeg``, ``png``, ``jpeg_array`` (alias ``jpegarray``) and
``list[pil]``, ``list[jpeg]``, ``list[png]`` (spec 4.1). Pillow is imported on first use.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from io import BytesIO
from typing import Any

from streaming_core.plugin_api import CodecError
from streaming_mds.encodings import Encoding, EncodingTypeError

__all__ = ['PIL', 'JPEG', 'PNG', 'JPEGArray', 'ImageList', 'list_factory']

_U32 = struct.Struct('<I')
_PIL_HEAD = struct.Struct('<3I')


def _image_module() -> Any:
    from PIL import Image
    return Image


class _ImageEncoding(Encoding):
    def _check(self, obj: Any) -> Any:
        image = _image_module()
        if not isinstance(obj, image.Image):
            raise self._wrong_type(obj, 'a PIL.Image.Image')
        return image

    def _open(self, data: bytes | memoryview) -> Any:
        try:
            return _image_module().open(BytesIO(bytes(data)))
        except Exception as err:  # PIL raises UnidentifiedImageError, OSError, ...
            raise CodecError(f'MDS encoding {self.name!r}: the stored bytes are not a readable image: {err}') from err


#: Pillow's palette modes, whose pixels are indices into a palette that the ``pil`` layout has no room for.
_PALETTE_MODES = frozenset({'P', 'PA'})


class PIL(_ImageEncoding):
    """``pil``: ``u32 width, u32 height, u32 len(mode)``, the mode (UTF-8), then the raw pixels (lossless).

    Palette images (modes ``P`` and ``PA``) are refused: the layout stores no palette, so they would read back with
    other colours.
    """

    name = 'pil'

    def encode(self, obj: Any) -> bytes:
        """Header, mode and ``Image.tobytes()``."""
        self._check(obj)
        if obj.mode in _PALETTE_MODES:
            target = 'RGB' if obj.mode == 'P' and 'transparency' not in obj.info else 'RGBA'
            raise CodecError(f'MDS encoding \'pil\' cannot store a {obj.mode} (palette) image: it stores the pixels '
                             f'without the palette, so the image would read back with other colours. Convert it '
                             f'first (image.convert({target!r})) or use the \'png\' encoding, which keeps the '
                             f'palette.')
        mode = obj.mode.encode('utf-8')
        width, height = obj.size
        return _PIL_HEAD.pack(width, height, len(mode)) + mode + obj.tobytes()

    def decode(self, data: bytes | memoryview) -> Any:
        """``Image.frombytes(mode, (width, height), raw)``."""
        if len(data) < 12:
            raise CodecError(f'pil data has {len(data)} bytes, fewer than its 12-byte header.')
        width, height, mode_len = _PIL_HEAD.unpack_from(data, 0)
        if len(data) < 12 + mode_len:
            raise CodecError('pil data is truncated inside its mode string.')
        mode = bytes(data[12:12 + mode_len]).decode('utf-8')
        try:
            return _image_module().frombytes(mode, (width, height), bytes(data[12 + mode_len:]))
        except Exception as err:
            raise CodecError(f'pil data for a {width}x{height} {mode} image is invalid: {err}') from err


class JPEG(_ImageEncoding):
    """``jpeg``: a JPEG file loaded from disk is stored verbatim; any other image is saved as JPEG (quality 75)."""

    name = 'jpeg'

    def encode(self, obj: Any) -> bytes:
        """The JPEG bytes."""
        self._check(obj)
        from PIL.JpegImagePlugin import JpegImageFile
        filename = getattr(obj, 'filename', None)
        if isinstance(obj, JpegImageFile) and filename and os.path.isfile(filename):
            with open(filename, 'rb') as handle:
                return handle.read()
        out = BytesIO()
        try:
            obj.save(out, format='JPEG')
        except OSError as err:
            raise CodecError(f'MDS encoding \'jpeg\' cannot save a {obj.mode} image as JPEG ({err}); convert it '
                             f'to RGB or L first, or use \'png\'.') from err
        return out.getvalue()

    def decode(self, data: bytes | memoryview) -> Any:
        """``Image.open`` (lazy)."""
        return self._open(data)


class PNG(_ImageEncoding):
    """``png``: saved as PNG (lossless)."""

    name = 'png'

    def encode(self, obj: Any) -> bytes:
        """The PNG bytes."""
        self._check(obj)
        out = BytesIO()
        try:
            obj.save(out, format='PNG')
        except OSError as err:
            raise CodecError(f'MDS encoding \'png\' cannot save a {obj.mode} image: {err}') from err
        return out.getvalue()

    def decode(self, data: bytes | memoryview) -> Any:
        """``Image.open`` (lazy)."""
        return self._open(data)


def _pack_parts(parts: Sequence[bytes], prefix: bytes = b'') -> bytes:
    sizes = struct.pack(f'<{len(parts)}I', *(len(p) for p in parts))
    return b''.join([prefix, _U32.pack(len(parts)), sizes, *parts])


def _unpack_parts(data: bytes | memoryview, pos: int, name: str) -> list[bytes]:
    if len(data) < pos + 4:
        raise CodecError(f'{name} data is truncated before its element count.')
    (count,) = _U32.unpack_from(data, pos)
    pos += 4
    if len(data) < pos + 4 * count:
        raise CodecError(f'{name} data is truncated inside its table of {count} sizes.')
    sizes = struct.unpack_from(f'<{count}I', data, pos)
    pos += 4 * count
    if pos + sum(sizes) != len(data):
        raise CodecError(f'{name} data holds {len(data) - pos} element bytes, but its sizes add up to '
                         f'{sum(sizes)}.')
    view = bytes(data)
    parts = []
    for size in sizes:
        parts.append(view[pos:pos + size])
        pos += size
    return parts


class JPEGArray(_ImageEncoding):
    """``jpeg_array`` (alias ``jpegarray``): a sequence of already JPEG-encoded byte strings.

    Layout: ``u32 count``, ``u32 sizes[count]``, then the bytes. Decodes to a list of PIL images; an empty
    sequence cannot be decoded (as in the reference).
    """

    name = 'jpeg_array'

    def encode(self, obj: Any) -> bytes:
        """Count, sizes, then the concatenated JPEG bytes."""
        if isinstance(obj, (bytes, bytearray, str)) or not isinstance(obj, Sequence):
            raise EncodingTypeError(f'MDS encoding \'jpeg_array\' takes a sequence of JPEG-encoded bytes, got '
                                    f'{type(obj).__name__}.')
        parts = []
        for item in obj:
            if not isinstance(item, (bytes, bytearray, memoryview)):
                raise EncodingTypeError(f'MDS encoding \'jpeg_array\' takes JPEG-encoded bytes, got an element of '
                                        f'type {type(item).__name__}.')
            parts.append(bytes(item))
        return _pack_parts(parts)

    def decode(self, data: bytes | memoryview) -> list[Any]:
        """The list of (lazily opened) images."""
        parts = _unpack_parts(data, 0, 'jpeg_array')
        if not parts:
            raise CodecError('jpeg_array data holds 0 images; an empty jpeg_array cannot be decoded.')
        return [self._open(part) for part in parts]


class ImageList(_ImageEncoding):
    """``list[pil]``, ``list[jpeg]``, ``list[png]``: a list of images, each encoded by the element encoding.

    Layout: ``u32 0`` (reserved), ``u32 count``, ``u32 sizes[count]``, then the encoded elements.
    """

    def __init__(self, element: type[_ImageEncoding], args: str | None = None) -> None:
        self.element = element()
        self.name = f'list[{self.element.name}]'
        super().__init__(args)

    def encode(self, obj: Any) -> bytes:
        """Reserved word, count, sizes, then each element's bytes."""
        if not isinstance(obj, list):
            raise self._wrong_type(obj, 'a list of PIL images')
        return _pack_parts([self.element.encode(item) for item in obj], prefix=_U32.pack(0))

    def decode(self, data: bytes | memoryview) -> list[Any]:
        """The list of images."""
        return [self.element.decode(part) for part in _unpack_parts(data, 4, self.name)]


def list_factory(element: type[_ImageEncoding]) -> Any:
    """The codec factory of ``list[<element>]``."""

    def factory(args: str | None = None) -> ImageList:
        return ImageList(element, args)

    factory.__name__ = f'list_{element.name}_codec'
    factory.__doc__ = f'Codec factory of the MDS encoding list[{element.name}].'
    return factory
