"""Which files of a directory a Parquet stream reads: Hugging Face split conventions and glob patterns.

``split='train'`` finds the split's files the way the Hugging Face Hub and ``datasets`` do, trying these layouts in
order and using the first that matches any file:

1. ``data/{split}-*.parquet`` and ``data/{split}.parquet`` (what ``push_to_hub`` writes:
   ``data/train-00000-of-00003.parquet``; for another configuration ``{config}/{split}-*.parquet``, which without
   ``config=`` are refused when several configurations have such files);
2. ``{config}/{split}/*.parquet`` (the Hub's Parquet conversion, ``default/train/0000.parquet``) and
   ``{split}/**`` (a directory named after the split), with ``config=`` restricting to one configuration (without
   it, files of several configurations are refused, naming them, as ``datasets`` refuses a missing config name);
3. a directory whose name contains the split as a word (``my-train-set/**``, ``dir/2023_train/**``);
4. a file whose name contains the split as a word (``train.parquet``, ``data/my_train_file-1.parquet``).

A split's usual synonyms count as the split (``validation``: ``valid``, ``val``, ``dev``; ``train``: ``training``;
``test``: ``testing``, ``eval``, ``evaluation``); "as a word" means delimited by ``-``, ``_``, ``.``, a space, a
digit or ``/``, as on the Hub. ``data_files=`` instead takes glob patterns relative to the directory (``*`` and
``?`` stay within one path component, ``**`` crosses directories), a list of them, or a ``{split: patterns}`` dict
from which ``split`` chooses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from streaming_core.plugin_api import StreamingError

__all__ = ['FileSelectionError', 'SPLIT_SYNONYMS', 'glob_regex', 'select_names', 'describe_selection']

#: The names the Hub accepts for the usual splits (``datasets.data_files.SPLIT_KEYWORDS``).
SPLIT_SYNONYMS: dict[str, tuple[str, ...]] = {
    'train': ('train', 'training'),
    'validation': ('validation', 'valid', 'dev', 'val'),
    'test': ('test', 'testing', 'eval', 'evaluation'),
}
_SEP = r'[-._ 0-9]'


class FileSelectionError(StreamingError, ValueError):
    """``split=`` / ``data_files=`` select no file of the directory, or are malformed."""


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """The compiled regular expression of a glob over ``/``-separated relative paths.

    ``*`` and ``?`` match within one path component, ``**`` any number of components (``**/`` also none),
    ``[...]`` a character class (``[!...]`` negated). A leading ``./`` or ``/`` is ignored.
    """
    pattern = pattern.lstrip('/')
    while pattern.startswith('./'):
        pattern = pattern[2:]
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith('**/', i):
            out.append('(?:.*/)?')
            i += 3
        elif pattern.startswith('**', i):
            out.append('.*')
            i += 2
        elif char == '*':
            out.append('[^/]*')
            i += 1
        elif char == '?':
            out.append('[^/]')
            i += 1
        elif char == '[':
            end = pattern.find(']', i + 2)
            if end < 0:
                out.append(re.escape(char))
                i += 1
                continue
            body = pattern[i + 1:end]
            if body.startswith('!'):
                body = '^' + body[1:]
            out.append('[' + body.replace('\\', '\\\\') + ']')
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile(''.join(out) + r'\Z')


def _keywords(split: str) -> tuple[str, ...]:
    return SPLIT_SYNONYMS.get(split, (split,))


def _split_layouts(split: str, config: str | None) -> list[tuple[str, re.Pattern[str]]]:
    """``(description, regex)`` of each Hub layout for ``split``, in the order they are tried."""
    words = '|'.join(re.escape(word) for word in _keywords(split))
    prefix = re.escape(config) + '/' if config else ''
    layouts = [
        (f'{config}/[data/]{split}-*.parquet' if config else f'data/{split}-*.parquet',
         re.compile(rf'{prefix}(?:data/)?(?:{words})(?:-[^/]*)?\.parquet\Z' if config
                    else rf'data/(?:{words})(?:-[^/]*)?\.parquet\Z')),
        (f'{config}/{split}/**' if config else f'{{config}}/{split}/*.parquet, {split}/**',
         re.compile(rf'{re.escape(config)}/(?:partial-)?(?:{words})/.*\Z' if config
                    else rf'(?:[^/]+/(?:partial-)?(?:{words})/[^/]*|(?:{words})/.*)\Z')),
        (f'a directory named like *-{split}-*',
         re.compile(rf'{prefix}(?:.*/)?(?:[^/]*{_SEP})?(?:{words})(?:{_SEP}[^/]*)?/.*\Z')),
        (f'a file named like *-{split}-*',
         re.compile(rf'{prefix}(?:.*/)?(?:[^/]*{_SEP})?(?:{words})(?:{_SEP}[^/]*)?\Z')),
    ]
    return layouts


def _patterns(data_files: str | Sequence[str] | Mapping[str, str | Sequence[str]] | None,
              split: str | None) -> list[str] | None:
    """The glob patterns ``data_files`` gives for ``split`` (``None``: no ``data_files``)."""
    if data_files is None:
        return None
    if isinstance(data_files, Mapping):
        if split is None:
            raise FileSelectionError(f'data_files is a dict of splits {sorted(data_files)}: pass split= one of '
                                     f'them.')
        if split not in data_files:
            raise FileSelectionError(f'split={split!r} is not in data_files (it has the splits '
                                     f'{sorted(data_files)}).')
        data_files = data_files[split]
    patterns = [data_files] if isinstance(data_files, str) else list(data_files)
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise FileSelectionError(f'data_files must be a glob pattern, a list of them or a {{split: patterns}} '
                                 f'dict, got {data_files!r}.')
    return patterns


def select_names(names: Sequence[str], *, split: str | None = None, config: str | None = None,
                 data_files: str | Sequence[str] | Mapping[str, str | Sequence[str]] | None = None) -> list[str]:
    """The names (relative ``/``-separated paths, in their given order) that ``split`` / ``data_files`` select.

    With neither, every name. Raises :class:`FileSelectionError` when nothing is selected, naming what was tried.
    """
    patterns = _patterns(data_files, split)
    if patterns is not None:
        regexes = [glob_regex(p) for p in patterns]
        chosen = [name for name in names if any(r.match(name) for r in regexes)]
        if not chosen:
            raise FileSelectionError(f'data_files={patterns} match none of the {len(names)} Parquet file(s) '
                                     f'({_summary(names)}).')
        return chosen
    if split is None and config is None:
        return list(names)
    if split is None:
        prefix = config.rstrip('/') + '/'  # type: ignore[union-attr]
        chosen = [name for name in names if name.startswith(prefix)]
        if not chosen:
            raise FileSelectionError(f'config={config!r}: no Parquet file under {prefix} ({_summary(names)}).')
        return chosen
    for number, (_, regex) in enumerate(_split_layouts(split, config)):
        chosen = [name for name in names if regex.match(name)]
        if chosen:
            if config is None:
                _one_config(chosen, split, number)
            return chosen
    tried = '; '.join(text for text, _ in _split_layouts(split, config))
    raise FileSelectionError(f'split={split!r}{f" config={config!r}" if config else ""} selects none of the '
                             f'{len(names)} Parquet file(s) ({_summary(names)}); tried the Hugging Face layouts: '
                             f'{tried}. Pass data_files= glob patterns to choose the files yourself.')


def _one_config(chosen: Sequence[str], split: str, layout: int) -> None:
    """Refuse a selection spanning several configurations (as ``datasets`` does: "Config name is missing"): the
    Hub conversion's ``{config}/{split}/`` (layout 2), or ``push_to_hub``'s files of several configurations,
    ``{config}/[data/]{split}-00000-of-00003.parquet`` (found by the name layouts, 3 and 4)."""
    words = '|'.join(re.escape(word) for word in _keywords(split))
    if layout == 1:
        shape, where = re.compile(rf'([^/]+)/(?:partial-)?(?:{words})/[^/]*\Z'), f'{{config}}/{split}/'
    elif layout >= 2:
        shape = re.compile(rf'([^/]+)/(?:data/)?(?:{words})-\d+-of-\d+\.parquet\Z')
        where = f'{{config}}/{split}-*-of-*.parquet (push_to_hub\'s files of a configuration)'
    else:
        return
    configs = sorted({found.group(1) for found in map(shape.match, chosen) if found is not None})
    if len(configs) > 1:
        raise FileSelectionError(f'split={split!r} matches {where} in {len(configs)} configurations '
                                 f'({", ".join(configs)}): pass config= one of them (e.g. config={configs[0]!r}); '
                                 f'a stream reads one configuration (data_files= patterns read several).')


def describe_selection(split: str | None, config: str | None, data_files: object) -> str:
    """A short, stable text of a selection (for format names and messages); empty when there is none."""
    parts = []
    if split is not None:
        parts.append(f'split={split}')
    if config is not None:
        parts.append(f'config={config}')
    if data_files is not None:
        parts.append(f'data_files={data_files!r}')
    return ','.join(parts)


def _summary(names: Sequence[str], limit: int = 5) -> str:
    shown = ', '.join(names[:limit])
    return shown + (f' and {len(names) - limit} more' if len(names) > limit else '') if names else 'none'
