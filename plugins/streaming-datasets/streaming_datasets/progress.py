"""The one progress display of every conversion: a bar that knows its total and ends at 100%, skips included.

A converter knows either how many source *records* a split has (images, CSV rows, metadata rows: each becomes a
sample or a counted skip) or only how many *items* it reads (files, chunks of documents). :class:`Progress` counts
whichever is known against its total, so the bar ends at exactly 100% even when records are skipped, and shows
the samples written and the records skipped beside it.

On a terminal it is a tqdm bar that stays on screen when done (its final state is the split's progress line). When
the output is not a terminal (a log file, CI), a bar's carriage returns would fill the log, so a plain line is
written every ``interval`` seconds and once at the end instead. The one-line result of each split is printed by
the ``streaming convert`` command after the conversion (:func:`streaming_datasets.cli.print_results`), never by the
engine: nothing is printed twice.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

__all__ = ['Progress']


class Progress:
    """Progress of one split's conversion, counted in records (when their number is known) or in items.

    Args:
        desc: The label (``'ImageNet train'``).
        records: The number of source records the producer will yield (samples plus skips), or None when unknown.
        items: The number of work items (files, chunks), counted instead of records when ``records`` is None.
        unit: What a record is called (``'images'``, ``'rows'``).
        item_unit: What an item is called (``'files'``, ``'chunks'``).
        enabled: False shows nothing.
        stream: Where to write (default ``sys.stderr``).
        interval: Seconds between two plain lines when ``stream`` is not a terminal.
    """

    def __init__(self, desc: str, *, records: int | None, items: int, unit: str = 'records',
                 item_unit: str = 'items', enabled: bool = True, stream: TextIO | None = None,
                 interval: float = 30.0) -> None:
        self.desc = desc
        self.by_records = records is not None
        self.total = int(records) if records is not None else int(items)
        self.unit = unit if self.by_records else item_unit
        self.samples = self.skipped = self.items = 0
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self._start = self._last = time.monotonic()
        self._bar: Any = None
        if enabled and _is_terminal(self.stream):
            from tqdm import tqdm
            # A terminal that reports no size (a fresh pty) would get no bar at all: assume 80x24 there.
            sized = _width(self.stream) > 0
            self._bar = tqdm(total=self.total, desc=desc, unit=f' {self.unit}', dynamic_ncols=sized,
                             ncols=None if sized else 80, nrows=None if sized else 24, leave=True, file=self.stream)
            self._bar.set_postfix_str(self._counts(), refresh=False)

    @property
    def done(self) -> int:
        """Records (samples plus skips) or items done, whichever the total counts."""
        return self.samples + self.skipped if self.by_records else self.items

    def update(self, samples: int = 0, skipped: int = 0, items: int = 0) -> None:
        """Count ``samples`` written, ``skipped`` records and ``items`` finished."""
        before = self.done
        self.samples += samples
        self.skipped += skipped
        self.items += items
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(self._counts(), refresh=False)
            if self.done != before:
                self._bar.update(self.done - before)
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._line()

    def close(self, ok: bool = True) -> None:
        """End the display: the bar's final state (or one last plain line) when the split succeeded."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(self._counts(), refresh=False)
            if ok:
                self._bar.refresh()
            self._bar.close()
            self._bar = None
        elif ok:
            self._line()

    def _counts(self) -> str:
        text = f'{self.samples:,} samples'
        return f'{text}, {self.skipped:,} skipped' if self.skipped else text

    def _line(self) -> None:
        percent = f' ({100 * self.done // self.total}%)' if self.total else ''
        elapsed = time.monotonic() - self._start
        print(f'{self.desc}: {self.done:,}/{self.total:,} {self.unit}{percent}, {self._counts()}, {elapsed:.0f} s',
              file=self.stream, flush=True)

    def __enter__(self) -> 'Progress':
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(ok=exc is None)


def _width(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 0


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
