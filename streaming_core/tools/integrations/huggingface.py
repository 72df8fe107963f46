"""The Hugging Face ``Trainer`` over a ``StreamingDataset``: every sample once per epoch, exact resumption.

One line of user code: ``StreamingTrainer`` in place of ``transformers.Trainer``::

    from streaming_core.tools.integrations.huggingface import StreamingTrainer

    trainer = StreamingTrainer(model=model, args=args, train_dataset=train, eval_dataset=val)
    trainer.train()                                   # or trainer.train(resume_from_checkpoint=True)

What it changes, for ``StreamingDataset`` datasets only (any other dataset goes through the ``Trainer`` untouched):

- **Training** reads through a :class:`~streaming_core.StreamingDataLoader` that accelerate does not wrap: a plain
  ``Trainer`` lets accelerate shard the iterable dataset a second time, and each of N ranks trains on 1/N of its
  share. Batches still go to the device (the ``Trainer`` moves every input itself).
- **Checkpoints** carry the loader's state (``streaming_state.json`` in each ``checkpoint-N`` directory), and
  ``train(resume_from_checkpoint=...)`` loads it: the run goes on at the exact sample, in the middle of an epoch,
  at an epoch end or in a later epoch, with any ``gradient_accumulation_steps`` and ``max_steps``. The
  ``Trainer``'s own fast-forward (``skip_first_batches``) is turned off for this loader, so nothing is skipped twice.
- **Evaluation** reads a ``StreamingDataset`` by random access (``dataset[i]``, each sample of its streams once)
  through the ``Trainer``'s own evaluation loader, so accelerate splits it between the ranks and drops the
  duplicates that even out the last batch before metrics are computed. Evaluation never touches the training
  dataset's epoch.

``transformers`` is imported when this module is, never by ``import streaming_core``.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Iterator

try:
    import transformers.trainer as _hf_trainer
    from torch.utils.data import Dataset
    from transformers import Trainer
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
except ImportError as err:  # pragma: no cover - exercised only without transformers
    raise ImportError('streaming_core.tools.integrations.huggingface needs the Hugging Face Trainer: '
                      'pip install transformers accelerate') from err

from streaming_core.reading.dataloader import StreamingDataLoader
from streaming_core.reading.dataset import StreamingDataset

__all__ = ['STATE_FILE', 'StreamingTrainer', 'IndexedView']

#: The file in each checkpoint directory that holds the training loader's resumption state.
STATE_FILE = 'streaming_state.json'


class IndexedView(Dataset):
    """A map-style view of a ``StreamingDataset``: ``view[i]`` is ``dataset[i]`` for each of its samples once.

    Evaluation reads it through the ``Trainer``'s distributed sampler, which splits it between the ranks and lets
    ``gather_for_metrics`` drop the duplicates that complete the last batch.
    """

    def __init__(self, dataset: StreamingDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return self.dataset.num_samples

    def __getitem__(self, index: int) -> Any:
        return self.dataset[int(index)]


def _positioned(loader: Any, num_batches: int = 0) -> Any:
    """``skip_first_batches`` for the ``Trainer`` while a ``StreamingTrainer`` trains: a ``StreamingDataLoader`` is
    already where its loaded state says, so it is returned as it is; other loaders are skipped as usual."""
    if isinstance(loader, StreamingDataLoader):
        return loader
    return _ORIGINAL_SKIP(loader, num_batches)


_ORIGINAL_SKIP = _hf_trainer.skip_first_batches


@contextlib.contextmanager
def _loader_positions_itself() -> Iterator[None]:
    """While training, the ``Trainer``'s ``skip_first_batches`` leaves a ``StreamingDataLoader`` alone."""
    previous = _hf_trainer.skip_first_batches
    _hf_trainer.skip_first_batches = _positioned
    try:
        yield
    finally:
        _hf_trainer.skip_first_batches = previous


def read_state(checkpoint: str) -> dict[str, Any]:
    """The training loader's state saved in a ``checkpoint-N`` directory by :class:`StreamingTrainer`.

    Raises:
        FileNotFoundError: The checkpoint does not exist, or has no state (it was written by a plain ``Trainer``).
    """
    path = os.path.join(checkpoint, STATE_FILE)
    if not os.path.isdir(checkpoint):
        raise FileNotFoundError(f'Checkpoint directory {checkpoint} does not exist on this machine: check the path '
                                f'(resume_from_checkpoint), and that every node can read the checkpoints.')
    if not os.path.exists(path):
        raise FileNotFoundError(
            f'{path} is missing: checkpoint {checkpoint} was not written by StreamingTrainer, so it does not say '
            f'which samples were consumed. Resume from a checkpoint that StreamingTrainer saved, or start training '
            f'from the beginning.')
    with open(path) as handle:
        state = json.load(handle)
    if not isinstance(state, dict):
        raise ValueError(f'{path} does not hold a resumption state (a JSON object), got {type(state).__name__}.')
    return state


def _write_state(directory: str, state: dict[str, Any]) -> None:
    """Write ``state`` into ``directory`` atomically (a crash leaves the old file or none, never half of one)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, STATE_FILE)
    temporary = f'{path}.tmp{os.getpid()}'
    with open(temporary, 'w') as handle:
        json.dump(state, handle)
    os.replace(temporary, path)


class StreamingTrainer(Trainer):
    """``transformers.Trainer`` that reads ``StreamingDataset`` train and eval datasets correctly.

    Takes exactly the ``Trainer``'s arguments. With a ``StreamingDataset`` as ``train_dataset``, the per-device
    batch size (``per_device_train_batch_size``) becomes the dataset's ``batch_size`` when it has none; a different
    one with ``dataloader_num_workers > 0`` is refused when training starts (see ``StreamingDataLoader``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._streaming_loader: StreamingDataLoader | None = None
        self._streaming_resume: dict[str, Any] | None = None

    # ------------------------------------------------------------------------------------------------------------
    # Data.
    def _loader_kwargs(self, description: str) -> dict[str, Any]:
        args = self.args
        kwargs: dict[str, Any] = {
            'collate_fn': self._get_collator_with_removed_columns(self.data_collator, description=description),
            'num_workers': args.dataloader_num_workers, 'pin_memory': args.dataloader_pin_memory,
            'drop_last': args.dataloader_drop_last}
        if args.dataloader_num_workers > 0:
            kwargs.update(persistent_workers=args.dataloader_persistent_workers,
                          prefetch_factor=args.dataloader_prefetch_factor,
                          multiprocessing_context=args.dataloader_multiprocessing_context)
        return kwargs

    def get_train_dataloader(self) -> Any:
        """A ``StreamingDataLoader`` for a ``StreamingDataset`` (at the loaded checkpoint's position when resuming);
        the ``Trainer``'s loader otherwise."""
        if not isinstance(self.train_dataset, StreamingDataset):
            return super().get_train_dataloader()
        loader = StreamingDataLoader(self.train_dataset, batch_size=self._train_batch_size,
                                     **self._loader_kwargs('training'))
        if self._streaming_resume is not None:
            loader.load_state_dict(self._streaming_resume)
            self._streaming_resume = None
        self._streaming_loader = loader
        return loader

    def get_eval_dataloader(self, eval_dataset: Any = None) -> Any:
        """The ``Trainer``'s evaluation loader; a ``StreamingDataset`` is read through an :class:`IndexedView`."""
        if eval_dataset is None and self.eval_dataset is not None and not isinstance(self.eval_dataset, dict):
            eval_dataset = self.eval_dataset
        elif isinstance(eval_dataset, str) and isinstance(self.eval_dataset, dict):
            eval_dataset = self.eval_dataset[eval_dataset]
        if isinstance(eval_dataset, StreamingDataset):
            eval_dataset = IndexedView(eval_dataset)
        return super().get_eval_dataloader(eval_dataset)

    def get_test_dataloader(self, test_dataset: Any) -> Any:
        """The ``Trainer``'s test loader; a ``StreamingDataset`` is read through an :class:`IndexedView`."""
        if isinstance(test_dataset, StreamingDataset):
            test_dataset = IndexedView(test_dataset)
        return super().get_test_dataloader(test_dataset)

    # ------------------------------------------------------------------------------------------------------------
    # Checkpoints.
    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """Write the loader's state into the checkpoint directory first, then everything the ``Trainer`` saves."""
        loader = self._streaming_loader
        if loader is not None and self.args.should_save:
            directory = os.path.join(self._get_output_dir(trial=trial),
                                     f'{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}')
            _write_state(directory, loader.state_dict())
        super()._save_checkpoint(model, trial)

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any) -> Any:
        """``Trainer.train``; resuming also restores the streaming position saved in the checkpoint."""
        checkpoint = resume_from_checkpoint
        if checkpoint is True:
            checkpoint = get_last_checkpoint(self.args.output_dir)
        if isinstance(checkpoint, str) and isinstance(self.train_dataset, StreamingDataset):
            self._streaming_resume = read_state(checkpoint)
        with _loader_positions_itself():
            return super().train(resume_from_checkpoint, *args, **kwargs)
