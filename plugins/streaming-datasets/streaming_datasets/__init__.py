"""Dataset recipes for streaming-core: converters and streaming classes for well-known datasets.

Converters (also ``streaming convert <name>``) turn a dataset in its published layout into MDS shards; streaming
classes read them back as the dataset's natural samples. The LLM helpers tokenize text and pack it into
fixed-length blocks. Names load on first access, so importing this package is cheap (the converters never import
torch).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = '0.1.0'

_LAZY = {
    'convert_cifar10': 'cifar10', 'convert_imagenet': 'imagenet', 'convert_coco': 'coco',
    'convert_ade20k': 'ade20k', 'convert_c4': 'c4', 'convert_pile': 'pile', 'convert_enwiki': 'enwiki',
    'convert_laion400m': 'laion', 'convert_webvid': 'webvid',
    'convert_packed_tokens': 'tokens', 'convert_tokens': 'tokens',
    'StreamingCIFAR10': 'vision', 'StreamingImageNet': 'vision', 'StreamingCOCO': 'vision',
    'StreamingADE20K': 'vision', 'StreamingC4': 'text', 'StreamingPile': 'text', 'StreamingEnWiki': 'text',
    'StreamingLAION400M': 'multimodal', 'StreamingWebVid': 'multimodal',
    'StreamingPackedTokens': 'packing', 'PackedTokenStream': 'packing',
    'ByteTokenizer': 'tokenizers', 'TokenSpec': 'tokenizers',
    'WriterOptions': 'conversion', 'ConversionResult': 'conversion', 'ConversionError': 'conversion',
    'SourceLayoutError': 'conversion', 'RecipeDataset': 'base',
}

__all__ = sorted([*_LAZY, '__version__'])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(f'{__name__}.{module}'), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
