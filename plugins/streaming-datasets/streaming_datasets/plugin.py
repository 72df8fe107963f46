"""Hook implementations of streaming-datasets: the converters of ``streaming convert``."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from streaming_core.plugin_api import RegistryView, hookimpl

#: Converter name -> ``module:function`` that adds its subcommand (imported when the converter is used).
CONVERTERS = {'cifar10': 'cifar10:register', 'imagenet': 'imagenet:register', 'coco': 'coco:register',
              'ade20k': 'ade20k:register', 'c4': 'c4:register', 'pile': 'pile:register',
              'enwiki': 'enwiki:register', 'laion400m': 'laion:register', 'webvid': 'webvid:register',
              'tokens': 'tokens:register_tokens', 'pack-tokens': 'tokens:register_pack_tokens'}


def _lazy(target: str) -> Callable[[Any], None]:
    module, _, name = target.partition(':')

    def register(subparsers: Any) -> None:
        getattr(importlib.import_module(f'streaming_datasets.{module}'), name)(subparsers)
    return register


@hookimpl
def register_converters(registry: RegistryView) -> None:
    """Register every recipe's ``streaming convert`` subcommand."""
    for name, target in CONVERTERS.items():
        registry.add(name, _lazy(target))
