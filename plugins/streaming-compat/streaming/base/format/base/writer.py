"""``streaming.base.format.base.writer``: the reference's module path of its writer base classes.

One base class, :class:`~streaming_core.writing.writer.ShardWriter`, serves every format here, so ``Writer``,
``JointWriter`` and ``SplitWriter`` all name it: ``isinstance(writer, JointWriter)`` holds for any of our writers,
and a subclass's ``encode_joint_shard`` or ``encode_split_shard`` override is called when a shard is flushed.
"""

from __future__ import annotations

from streaming_core.plugin_api import ShardWriter

Writer = JointWriter = SplitWriter = ShardWriter

__all__ = ['Writer', 'JointWriter', 'SplitWriter']
