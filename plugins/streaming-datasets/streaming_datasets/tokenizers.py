"""Tokenizers for the LLM helpers: any callable ``str -> list[int]``, plus a built-in byte-level one.

A tokenizer may carry ``vocab_size``, ``eos_id``/``eos_token_id`` and ``pad_id``/``pad_token_id`` attributes
(:class:`ByteTokenizer` and Hugging Face tokenizers do); where it does not, give them explicitly. A call may return
a list, a 1-D integer array, or a mapping with ``input_ids`` (a Hugging Face ``BatchEncoding``).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ['ByteTokenizer', 'TokenSpec', 'resolve_tokenizer', 'token_dtype', 'AUTO']

#: The default of ``eos_id``/``pad_id``: take the id from the tokenizer's attributes.
AUTO = 'auto'
_UINT16_LIMIT = 1 << 16


class ByteTokenizer:
    """The built-in byte-level tokenizer: the UTF-8 bytes of the text are the ids 0..255.

    ``eos_id`` (256) separates documents and ``pad_id`` (257) fills the last block; ``vocab_size`` is 258, so tokens
    are stored as ``uint16``. ``decode`` inverts it (special ids are dropped).
    """

    vocab_size = 258
    eos_id = 256
    pad_id = 257

    def __call__(self, text: str) -> list[int]:
        """The UTF-8 bytes of ``text`` as a list of ids."""
        return list(text.encode('utf-8'))

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """The text of byte ids (ids above 255 are dropped)."""
        return bytes(int(i) for i in ids if int(i) < 256).decode('utf-8', errors='replace')

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByteTokenizer)

    def __hash__(self) -> int:
        return hash(ByteTokenizer)

    def __repr__(self) -> str:
        return 'ByteTokenizer()'


def _import(module_name: str) -> Any:
    """Import ``module_name`` as ``python -m`` would: a module in the current directory is found too.

    A console script such as ``streaming`` puts its own folder on ``sys.path``, not the current directory, so a
    ``my_tokenizer.py`` next to the user would not be found. When the module is not found on ``sys.path`` but its
    file or package is in the current directory, the current directory is added to ``sys.path`` (worker processes
    started with ``spawn`` inherit it) and the import is retried.
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        top = module_name.split('.')[0]
        cwd = os.getcwd()
        if err.name != top or not (os.path.isfile(os.path.join(cwd, f'{top}.py'))
                                   or os.path.isdir(os.path.join(cwd, top))):
            raise
        if cwd not in sys.path and '' not in sys.path:
            sys.path.insert(0, cwd)
        importlib.invalidate_caches()
        return importlib.import_module(module_name)


def resolve_tokenizer(spec: str | Callable[[str], Any] | None) -> Callable[[str], Any]:
    """A tokenizer from ``None``/``'bytes'`` (the built-in), a ``'package.module:name'`` import path (a class is
    instantiated with no arguments; the module may be a file in the current directory), or a callable (returned
    as is)."""
    if spec is None or spec == 'bytes':
        return ByteTokenizer()
    if callable(spec):
        return spec
    if not isinstance(spec, str) or ':' not in spec:
        raise ValueError(f'Unknown tokenizer {spec!r}: give "bytes" (the built-in byte-level tokenizer) or an import '
                         f'path "package.module:name" naming a callable str -> list[int] (or a class making one).')
    module_name, _, attr = spec.partition(':')
    try:
        target: Any = _import(module_name)
        for part in attr.split('.'):
            target = getattr(target, part)
    except (ImportError, AttributeError) as err:
        raise ValueError(f'Cannot import the tokenizer {spec!r}: {err}. The module must be importable: installed, '
                         f'on PYTHONPATH, or a file {module_name.split(".")[0]}.py in the current directory '
                         f'({os.getcwd()}).') from err
    if isinstance(target, type):
        target = target()
    if not callable(target):
        raise ValueError(f'The tokenizer {spec!r} is a {type(target).__name__}, not a callable str -> list[int].')
    return target


def token_dtype(vocab_size: int | None) -> str:
    """``'uint16'`` when every id fits (``vocab_size <= 65536``), else ``'uint32'`` (also when unknown)."""
    return 'uint16' if vocab_size is not None and vocab_size <= _UINT16_LIMIT else 'uint32'


def _attribute(tokenizer: Any, names: Sequence[str]) -> int | None:
    for name in names:
        value = getattr(tokenizer, name, None)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
    return None


def _vocab_size(tokenizer: Any) -> int | None:
    value = _attribute(tokenizer, ('vocab_size',))
    if value is not None and hasattr(tokenizer, '__len__'):  # Hugging Face: len() counts added tokens too
        try:
            value = max(value, len(tokenizer))
        except TypeError:
            pass
    return value


@dataclass(frozen=True)
class TokenSpec:
    """A tokenizer with its special ids and storage dtype, validated (picklable when the tokenizer is).

    Attributes:
        tokenizer: The callable.
        eos_id: The separator appended after every document (None: no separator).
        pad_id: The id filling the last, partial block (None: the last partial block is an error when packing).
        vocab_size: Ids must be below it (None: unknown; ids must fit ``uint32``).
        dtype: ``'uint16'`` or ``'uint32'``.
    """

    tokenizer: Callable[[str], Any]
    eos_id: int | None
    pad_id: int | None
    vocab_size: int | None
    dtype: str

    @classmethod
    def create(cls, tokenizer: str | Callable[[str], Any] | None = None, *, eos_id: int | str | None = AUTO,
               pad_id: int | str | None = AUTO, vocab_size: int | None = None) -> 'TokenSpec':
        """Resolve the tokenizer and its special ids (``'auto'``: from its attributes; for ``pad_id``, falling back
        to ``eos_id``)."""
        tok = resolve_tokenizer(tokenizer)
        vocab = vocab_size if vocab_size is not None else _vocab_size(tok)
        if vocab is not None and (isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1):
            raise ValueError(f'vocab_size must be a positive integer, got {vocab!r}.')
        if eos_id == AUTO:
            eos_id = _attribute(tok, ('eos_id', 'eos_token_id'))
            if eos_id is None:
                raise ValueError(f'The tokenizer {tok!r} has no eos_id/eos_token_id: give eos_id (the separator '
                                 f'appended after each document), or eos_id=None for no separator.')
        if pad_id == AUTO:
            pad_id = _attribute(tok, ('pad_id', 'pad_token_id'))
            if pad_id is None:
                pad_id = eos_id
        dtype = token_dtype(vocab)
        limit = vocab if vocab is not None else 1 << 32
        for name, value in (('eos_id', eos_id), ('pad_id', pad_id)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                      or not 0 <= int(value) < limit):
                raise ValueError(f'{name} must be an integer in [0, {limit}), got {value!r}.')
        return cls(tok, None if eos_id is None else int(eos_id), None if pad_id is None else int(pad_id), vocab, dtype)

    @property
    def limit(self) -> int:
        """Ids must be below this."""
        return self.vocab_size if self.vocab_size is not None else 1 << 32

    def encode(self, text: str, where: str) -> np.ndarray:
        """The ids of ``text`` as a 1-D array of :attr:`dtype`, checked against :attr:`limit`."""
        if not isinstance(text, str):
            raise TypeError(f'{where}: expected text (str) to tokenize, got {type(text).__name__}.')
        return self.check(self.tokenizer(text), where)

    def check(self, ids: Any, where: str) -> np.ndarray:
        """Validate token ids (a list, an array, or a mapping with ``input_ids``) and cast them to :attr:`dtype`."""
        if isinstance(ids, Mapping):
            ids = ids.get('input_ids')
        array = np.asarray(ids if ids is not None else [])
        if array.size == 0:
            return np.zeros(0, dtype=self.dtype)
        if array.ndim != 1 or array.dtype.kind not in 'iu':
            raise ValueError(f'{where}: the tokenizer must return a flat list of integer ids, got an array of '
                             f'{array.dtype} with shape {array.shape}.')
        low, high = int(array.min()), int(array.max())
        if low < 0 or high >= self.limit:
            bad = low if low < 0 else high
            raise ValueError(f'{where}: token id {bad} is outside [0, {self.limit}) (vocab_size '
                             f'{self.vocab_size}); pass the right vocab_size.')
        return array.astype(self.dtype, copy=False)
