"""Image-folder source: ``SRC/<class name>/.../<image file>`` to ``image``, ``label``, ``label_name``, ``path``.

* ``label`` is the index of the class directory among the sorted class names, ``label_name`` its name and
  ``path`` the file's path relative to ``SRC`` (with ``/``).
* Images are listed in sorted order (class, then relative path), which is the sample order.
* ``image`` stores the original file bytes, never re-encoded: the column is ``jpeg`` when every file is a JPEG
  (``.jpg``/``.jpeg``), ``png`` when every file is a PNG, else ``bytes``. A file whose content does not match a
  ``jpeg``/``png`` column (checked by its magic bytes), or any file of a column given another image encoding with
  ``--columns image:ENCODING`` (``pil``, ``jpeg``...), is opened with Pillow and encoded by that encoding instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streaming_core.tools.convert.base import Progress, Source

__all__ = ['ImageFolderSource', 'IndexPart', 'IMAGE_SUFFIXES', 'image_format']

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.gif', '.webp', '.tif', '.tiff', '.ppm', '.pgm')
_MAGIC = {'jpeg': (b'\xff\xd8\xff',), 'png': (b'\x89PNG\r\n\x1a\n',)}


@dataclass(frozen=True)
class IndexPart:
    """Images ``[start, end)`` of the sorted list."""

    start: int
    end: int


def image_format(data: bytes) -> str | None:
    """``'jpeg'`` or ``'png'`` from the magic bytes, else None."""
    for name, magics in _MAGIC.items():
        if data.startswith(magics):
            return name
    return None


class ImageFolderSource(Source):
    """A tree of class directories holding images.

    Args:
        src: The root directory; each direct subdirectory is a class (hidden ones are skipped).
    """

    kind = 'imagefolder'
    unit = 'files'

    def __init__(self, src: str) -> None:
        if not os.path.isdir(src):
            raise FileNotFoundError(f'Image folder {src} is not a directory; expected SRC/<class name>/<images>.')
        self.src = src
        self.classes = sorted(entry.name for entry in os.scandir(src)
                              if entry.is_dir() and not entry.name.startswith('.'))
        if not self.classes:
            raise FileNotFoundError(f'Image folder {src} has no class subdirectories; expected '
                                    f'SRC/<class name>/<images>.')
        self.items: list[tuple[str, int]] = []
        for label, name in enumerate(self.classes):
            root = os.path.join(src, name)
            found = []
            for dirpath, dirs, files in os.walk(root):
                dirs[:] = [d for d in dirs if not d.startswith('.')]
                for file in files:
                    if not file.startswith('.') and file.lower().endswith(IMAGE_SUFFIXES):
                        found.append(os.path.relpath(os.path.join(dirpath, file), src).replace(os.sep, '/'))
            found.sort(key=lambda rel: rel.split('/'))
            self.items.extend((rel, label) for rel in found)
        if not self.items:
            raise FileNotFoundError(f'Image folder {src} holds no images ({", ".join(IMAGE_SUFFIXES)}).')
        self.total = len(self.items)
        self.image_encoding = 'jpeg'
        self.read_images = True


    def input_paths(self) -> list[str]:
        """The image folder."""
        return [self.src]
    def infer_columns(self) -> dict[str, str]:
        """``image`` (``jpeg``/``png``/``bytes`` by file suffix), ``label`` int, ``label_name`` and ``path`` str."""
        suffixes = {os.path.splitext(rel)[1].lower() for rel, _ in self.items}
        if suffixes <= {'.jpg', '.jpeg'}:
            image = 'jpeg'
        elif suffixes == {'.png'}:
            image = 'png'
        else:
            image = 'bytes'
        return {'image': image, 'label': 'int', 'label_name': 'str', 'path': 'str'}

    def configure(self, columns: Mapping[str, str]) -> None:
        """Remember the final encoding of ``image`` (decides when file bytes can be stored as they are)."""
        self.image_encoding = columns.get('image', 'bytes')
        self.read_images = 'image' in columns

    def split(self, parts: int) -> list[IndexPart]:
        """Equal ranges of the sorted image list."""
        return [IndexPart(self.total * i // parts, self.total * (i + 1) // parts) for i in range(parts)]

    def _image(self, data: bytes, rel: str) -> Any:
        encoding = self.image_encoding
        if encoding == 'bytes' or image_format(data) == encoding:
            return data
        from io import BytesIO

        from PIL import Image
        try:
            image = Image.open(BytesIO(data))
            image.load()
        except Exception as err:  # Pillow raises many types for unreadable files
            raise ValueError(f'{os.path.join(self.src, rel)} is not a readable image: {err}') from err
        if encoding == 'jpeg' and image.mode not in ('RGB', 'L', 'CMYK'):
            image = image.convert('RGB')
        return image

    def read(self, part: IndexPart, progress: Progress) -> Iterator[dict[str, Any]]:
        """Yield one sample per image."""
        for rel, label in self.items[part.start:part.end]:
            sample: dict[str, Any] = {'label': label, 'label_name': self.classes[label], 'path': rel}
            if self.read_images:
                with open(os.path.join(self.src, rel), 'rb') as handle:
                    sample['image'] = self._image(handle.read(), rel)
            yield sample
            progress(1)

    def describe(self, part: IndexPart) -> str:
        """The image range."""
        return f'images {part.start}-{part.end} of {self.src}'
