"""The arguments the sample order depends on, validated in one place: :class:`OrderConfig`.

``StreamingDataset`` and :class:`~streaming_core.ordering.planner.EpochPlanner` share it: the dataset keeps one (its
public attributes ``shuffle``, ``shuffle_seed``, ``num_canonical_nodes``... read and write its fields) and builds each
epoch's planner from it; the planner checks its own order arguments with it. Each check raises the error the
reference raises for that argument (a ``ValueError`` naming the argument and the value given).

Two arguments have defaults that depend on the run: ``num_canonical_nodes`` (from the physical node count and the
shuffle, :func:`default_num_canonical_nodes`) and ``shuffle_block_size`` (from the canonical node count,
:func:`default_shuffle_block_size`); :meth:`OrderConfig.resolved` fills them in.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, fields, replace
from typing import Any

from streaming_core.common.arguments import number_abbrev_to_int
from streaming_core.errors import UnknownMethodError, UnknownNameError
from streaming_core.ordering.partition import PARTITION_ALGOS

__all__ = ['OrderConfig', 'OrderField', 'PLANNER_FIELDS', 'SAMPLING_METHODS', 'SPLIT_NODES_FACTOR',
           'default_num_canonical_nodes', 'default_shuffle_block_size', 'parse_epoch_size', 'shuffle_declares']

#: The resampling methods of partially repeated streams.
SAMPLING_METHODS = ('balanced', 'fixed')
#: Canonical nodes per physical node by default for a shuffle that declares ``splits_canonical_nodes``.
SPLIT_NODES_FACTOR = 64
#: The fields of :class:`OrderConfig` that :class:`~streaming_core.ordering.planner.EpochPlanner` takes (all but
#: ``replication``, which shapes the world rather than the plan).
PLANNER_FIELDS = ('batch_size', 'num_canonical_nodes', 'shuffle', 'shuffle_algo', 'shuffle_seed',
                  'shuffle_block_size', 'partition_algo', 'batching_method', 'sampling_method',
                  'sampling_granularity')


def _is_int(value: Any) -> bool:
    """An integer (NumPy integers included), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class OrderConfig:
    """The order arguments of a dataset, validated and normalised (Python ``int``/``bool``) when created.

    Changing one makes a new config (``dataclasses.replace``), validated again; a config is immutable, so a dataset
    and the planners built from it can share it.

    Attributes:
        shuffle: Shuffle the samples.
        shuffle_algo: A registered shuffle name (looked up by :meth:`check_registered`, not here).
        shuffle_seed: The shuffle seed (a non-negative integer).
        shuffle_block_size: The shuffle block size, or None for the default (:meth:`resolved`).
        num_canonical_nodes: The number of canonical nodes, or None for the default (:meth:`resolved`).
        partition_algo: ``'orig'`` or ``'relaxed'``.
        batching_method: A registered batching method name (looked up by :meth:`check_registered`).
        sampling_method: ``'balanced'`` or ``'fixed'``.
        sampling_granularity: Samples per pick when a stream is partially repeated (a positive integer).
        batch_size: The per-device batch size, or None (not given yet: a loader may set it).
        replication: Consecutive ranks that read identical samples, or None.

    Raises:
        ValueError: An argument out of its range or of the wrong type, naming it and the value given.
    """

    shuffle: bool = False
    shuffle_algo: str = 'py1e'
    shuffle_seed: int = 9176
    shuffle_block_size: int | None = None
    num_canonical_nodes: int | None = None
    partition_algo: str = 'relaxed'
    batching_method: str = 'random'
    sampling_method: str = 'balanced'
    sampling_granularity: int = 1
    batch_size: int | None = None
    replication: int | None = None

    def __post_init__(self) -> None:
        if self.sampling_method not in SAMPLING_METHODS:
            raise ValueError(f'Invalid sampling method: {self.sampling_method}. Must be one of '
                             f'{list(SAMPLING_METHODS)}.')
        if not _is_int(self.sampling_granularity) or self.sampling_granularity <= 0:
            raise ValueError(f'`sampling_granularity` must be a positive integer, but got: '
                             f'{self.sampling_granularity}.')
        if self.partition_algo not in PARTITION_ALGOS:
            raise ValueError(f'Invalid partition_algo: {self.partition_algo!r}. Must be one of '
                             f'{list(PARTITION_ALGOS)}.')
        if not _is_int(self.shuffle_seed) or self.shuffle_seed < 0:
            raise ValueError(f'Invalid shuffle_seed: {self.shuffle_seed!r}. It must be a non-negative integer.')
        if self.batch_size is not None and (not _is_int(self.batch_size) or self.batch_size < 1):
            raise ValueError(f'`batch_size` must be a positive integer (the per-device batch size), got '
                             f'{self.batch_size!r}.')
        if self.num_canonical_nodes is not None and (not _is_int(self.num_canonical_nodes)
                                                     or self.num_canonical_nodes < 1):
            raise ValueError(f'`num_canonical_nodes` must be a positive integer, got {self.num_canonical_nodes!r}.')
        if self.shuffle_block_size is not None and (not isinstance(self.shuffle_block_size, numbers.Integral)
                                                    or self.shuffle_block_size < 1):
            raise ValueError(f'`shuffle_block_size` must be a positive integer, got {self.shuffle_block_size!r}.')
        if self.replication is not None and (not _is_int(self.replication) or self.replication <= 0):
            raise ValueError(f'Replication factor must be positive. Got {self.replication!r}.')
        normal = {'shuffle': bool(self.shuffle), 'shuffle_seed': int(self.shuffle_seed),
                  'sampling_granularity': int(self.sampling_granularity)}
        for name in ('shuffle_block_size', 'num_canonical_nodes', 'batch_size', 'replication'):
            value = getattr(self, name)
            normal[name] = None if value is None else int(value)
        for name, value in normal.items():
            object.__setattr__(self, name, value)

    def check_registered(self) -> None:
        """Check that ``shuffle_algo`` and ``batching_method`` name installed plugins (the dataset calls this at
        construction, so a misspelt name fails before any download; a planner looks them up when planning). A name
        the plugin manifest attributes to an installed plugin passes without importing that plugin.

        Raises:
            UnknownNameError: ``shuffle_algo`` is not a registered shuffle (listing the installed ones).
            UnknownMethodError: ``batching_method`` is not a registered batching method (a ``ValueError`` as
                well, as the reference's check).
        """
        from streaming_core.machinery.lookup import get_registry  # the plugin host, once a dataset is built
        get_registry('shuffle').check(self.shuffle_algo)
        try:
            get_registry('batching').check(self.batching_method)
        except UnknownNameError as err:
            raise UnknownMethodError(f'batching_method={self.batching_method!r}: {err}') from None

    def resolved(self, physical_nodes: int) -> 'OrderConfig':
        """This config with the run-dependent defaults filled in for ``physical_nodes`` nodes: the reference's
        ``num_canonical_nodes`` (:func:`default_num_canonical_nodes`) and then ``shuffle_block_size``
        (:func:`default_shuffle_block_size`). Returns ``self`` when both are set."""
        if self.num_canonical_nodes is not None and self.shuffle_block_size is not None:
            return self
        ncn = self.num_canonical_nodes
        if ncn is None:
            ncn = default_num_canonical_nodes(self.shuffle_algo, physical_nodes)
        block = self.shuffle_block_size
        if block is None:
            block = default_shuffle_block_size(ncn)
        return replace(self, num_canonical_nodes=ncn, shuffle_block_size=block)

    def planner_arguments(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~streaming_core.ordering.planner.EpochPlanner` this config gives
        (:data:`PLANNER_FIELDS`)."""
        return {name: getattr(self, name) for name in PLANNER_FIELDS}


class OrderField:
    """A data descriptor: the attribute of this name reads and writes that field of its object's ``order_config``
    (an :class:`OrderConfig`); a write replaces the config by a validated copy.

    ``StreamingDataset`` declares its order attributes with it, so ``dataset.shuffle_seed`` and
    ``dataset.order_config.shuffle_seed`` are one value and an invalid assignment raises like the argument would.
    """

    name: str

    def __set_name__(self, owner: type, name: str) -> None:
        if name not in {f.name for f in fields(OrderConfig)}:
            raise TypeError(f'OrderField {name!r} on {owner.__name__}: OrderConfig has no field {name!r}.')
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj.order_config, self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        config = replace(obj.order_config, **{self.name: value})
        if self.name in ('shuffle_algo', 'batching_method'):
            config.check_registered()  # a misspelt name fails here, as the argument would, not at iteration
        obj.order_config = config


def parse_epoch_size(epoch_size: int | str | None) -> int | None:
    """The ``epoch_size`` argument as a sample count (``'100k'``-style abbreviations allowed), or None when not
    given (None, 0 or ``''``: the streams' weights decide).

    Raises:
        ValueError: A negative size, or an unknown suffix.
    """
    if epoch_size is None or epoch_size == 0 or epoch_size == '':
        return None
    parsed = number_abbrev_to_int(epoch_size)
    if parsed < 0:
        raise ValueError(f'Epoch size cannot be negative. Received {epoch_size}.')
    return parsed or None


def shuffle_declares(algorithm: Any, name: str) -> bool:
    """Whether a shuffle algorithm (an object, or a registered name) declares the boolean property ``name``.

    Shuffles declare properties as attributes (see :class:`~streaming_core.machinery.protocols.ShuffleAlgorithm`):
    ``splits_canonical_nodes`` and ``spreads_shards_within_block``. An undeclared property is False.
    """
    if isinstance(algorithm, str):
        from streaming_core.machinery.lookup import get_registry
        algorithm = get_registry('shuffle').get(algorithm)
    return bool(getattr(algorithm, name, False))


def default_num_canonical_nodes(shuffle_algo: str, physical_nodes: int) -> int:
    """The reference's default: ``64 * nodes`` for a shuffle that declares ``splits_canonical_nodes`` (``py1s``,
    ``py2s``), else the node count.

    Raises:
        UnknownNameError: ``shuffle_algo`` is not a registered shuffle.
    """
    if int(physical_nodes) < 1:
        raise ValueError(f'The number of physical nodes must be positive, got {physical_nodes}.')
    if shuffle_declares(shuffle_algo, 'splits_canonical_nodes'):
        return SPLIT_NODES_FACTOR * int(physical_nodes)
    return int(physical_nodes)


def default_shuffle_block_size(num_canonical_nodes: int) -> int:
    """The reference's default: ``max(4_000_000 // NCN, 1 << 18)``."""
    if int(num_canonical_nodes) < 1:
        raise ValueError(f'num_canonical_nodes must be positive, got {num_canonical_nodes}.')
    return max(4_000_000 // int(num_canonical_nodes), 1 << 18)
