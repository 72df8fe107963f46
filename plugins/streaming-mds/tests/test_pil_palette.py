"""The ``pil`` encoding stores no palette: palette images are refused, with the conversion to make; what it does
store reads back with the same pixels."""

from __future__ import annotations

from typing import Any

import pytest

from streaming_core import StreamingDataset
from streaming_core.errors import CodecError
from streaming_mds import MDSWriter

PIL = pytest.importorskip('PIL')
from PIL import Image  # noqa: E402


def read_back(out: str) -> list[dict[str, Any]]:
    dataset = StreamingDataset(local=out, shuffle=False, batch_size=1)
    return [dataset[i] for i in range(dataset.num_samples)]


def palette_image(mode: str = 'P') -> Any:
    image = Image.new('RGB', (4, 3), (255, 0, 0))
    image.paste((0, 128, 255), (0, 0, 2, 3))
    image = image.convert('P', palette=Image.Palette.ADAPTIVE, colors=4)
    return image.convert('PA') if mode == 'PA' else image


@pytest.mark.parametrize('mode,target', [('P', 'RGB'), ('PA', 'RGBA')])
@pytest.mark.parametrize('encoding', ['pil', 'list[pil]'])
def test_palette_images_are_refused(tmp_path: Any, mode: str, target: str, encoding: str) -> None:
    image = palette_image(mode)
    out = str(tmp_path / 'ds')
    value = [image] if encoding == 'list[pil]' else image
    with MDSWriter(out=out, columns={'img': encoding}) as writer:
        with pytest.raises(CodecError, match=rf"cannot store a {mode} \(palette\) image.*convert\('{target}'\).*'png'"):
            writer.write({'img': value})
        converted = image.convert(target)
        writer.write({'img': [converted] if encoding == 'list[pil]' else converted})
    got = read_back(out)[0]['img']
    got = got[0] if encoding == 'list[pil]' else got
    assert got.mode == target and got.size == image.size and got.tobytes() == image.convert(target).tobytes()


def test_palette_images_keep_their_colours_as_png(tmp_path: Any) -> None:
    image = palette_image()
    out = str(tmp_path / 'ds')
    with MDSWriter(out=out, columns={'img': 'png'}) as writer:
        writer.write({'img': image})
    got = read_back(out)[0]['img']
    assert got.convert('RGB').tobytes() == image.convert('RGB').tobytes()


@pytest.mark.parametrize('mode', ['1', 'L', 'LA', 'RGB', 'RGBA', 'CMYK', 'I', 'F', 'I;16'])
def test_other_modes_read_back_with_the_same_pixels(tmp_path: Any, mode: str) -> None:
    image = palette_image().convert('RGBA').convert(mode) if mode != 'I;16' else Image.new('I;16', (4, 3), 513)
    out = str(tmp_path / 'ds')
    with MDSWriter(out=out, columns={'img': 'pil'}) as writer:
        writer.write({'img': image})
    got = read_back(out)[0]['img']
    assert got.mode == mode and got.size == image.size and got.tobytes() == image.tobytes()
