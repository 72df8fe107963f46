"""The reference's dataset classes (``streaming.vision`` / ``text`` / ``multimodal``) mapped to the recipes of
``streaming-datasets``.

Each class is the recipe class combined with :class:`streaming.StreamingDataset`, so ``isinstance(ds,
streaming.StreamingDataset)`` holds, and takes the reference class's order defaults (``partition_algo``,
``shuffle_algo``, ``shuffle_block_size``) so a run switched from the reference keeps its sample order.
"""

from __future__ import annotations

from typing import Any

from streaming.base.dataset import StreamingDataset
from streaming_core.errors import NotSupportedError

__all__ = ['compat_recipe', 'unsupported_recipe', 'REFERENCE_ORDER_DEFAULTS']

#: The order defaults of the reference's vision and text classes (they differ from StreamingDataset's).
REFERENCE_ORDER_DEFAULTS = {'partition_algo': 'orig', 'shuffle_algo': 'py1s', 'shuffle_block_size': 1 << 18}


def compat_recipe(name: str, recipe: type, defaults: dict[str, Any], doc: str) -> type:
    """A class named ``name``: ``recipe`` (a streaming-datasets class) and :class:`StreamingDataset` in one, with
    ``defaults`` applied to arguments the caller leaves out."""

    def __init__(self: Any, **kwargs: Any) -> None:
        for key, value in defaults.items():
            kwargs.setdefault(key, value)
        recipe.__init__(self, **kwargs)

    __init__.__doc__ = f'See :class:`{recipe.__module__}.{recipe.__name__}`; defaults: {defaults}.'
    return type(name, (recipe, StreamingDataset), {'__init__': __init__, '__doc__': doc,
                                                   '__module__': 'streaming.' + _area(recipe)})


def _area(recipe: type) -> str:
    module = recipe.__module__.rsplit('.', 1)[-1]
    return {'vision': 'vision', 'text': 'text', 'multimodal': 'multimodal'}.get(module, 'vision')


def unsupported_recipe(name: str, area: str, why: str) -> type:
    """A class named ``name`` whose construction raises :class:`NotSupportedError` saying ``why``."""

    def __init__(self: Any, **kwargs: Any) -> None:
        raise NotSupportedError(f'streaming.{area}.{name} is not provided by streaming-compat: {why}')

    return type(name, (StreamingDataset,), {'__init__': __init__, '__doc__': f'Not provided: {why}',
                                            '__module__': f'streaming.{area}'})
