"""Integrations with training frameworks, each imported on its own so that none of them is a core dependency.

- :mod:`streaming_core.tools.integrations.huggingface`: ``StreamingTrainer``, the Hugging Face ``Trainer`` reading a
  ``StreamingDataset`` exactly once per epoch and resuming exactly from its checkpoints (needs ``transformers``).
- :mod:`streaming_core.reading.resharding`: detects a ``StreamingDataset`` wrapped by another library's
  sharding (accelerate), which would train each rank on a fraction of its share.
"""
