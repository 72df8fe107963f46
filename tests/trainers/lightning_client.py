"""A Lightning training run that logs every sample id per rank: ``python -m tests.trainers.lightning_client CONFIG``.

CONFIG (JSON): ``data`` (the MDS directory), ``run`` (where logs and checkpoints go), ``strategy``, ``devices``,
``epochs``, ``batch`` (per device), ``workers``, ``ckpt`` (a checkpoint to resume from, or null), ``save`` (save a
checkpoint every 5 steps and at every epoch end) and ``val`` (validate on split ``val`` at every epoch end; default
true). The DataModule is the one of ``docs/guide/lightning.md``.
"""

from __future__ import annotations

import json
import os
import re
import sys

import lightning as L
import torch

from tests.trainers.teardown import end_distributed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _page_datamodule() -> None:
    """Define ``StreamingDataModule`` here from the first Python block of the Lightning docs page."""
    with open(os.path.join(ROOT, 'docs', 'guide', 'lightning.md')) as handle:
        block = re.findall(r'^```python\n(.*?)^```', handle.read(), re.S | re.M)[0]
    exec(compile(block, 'docs/guide/lightning.md', 'exec'), globals())


_page_datamodule()


class Logged(L.LightningModule):
    """A Linear layer; every training batch's sample ids go to ``log-rank{rank}.jsonl``."""

    def __init__(self, run: str) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.run = run
        self.handle = None

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        if self.handle is None:
            self.handle = open(os.path.join(self.run, f'log-rank{self.global_rank}.jsonl'), 'a')
        ids = batch['id'].tolist()
        record = {'epoch': self.current_epoch, 'step': self.global_step, 'ids': ids}
        self.handle.write(json.dumps(record) + '\n')
        self.handle.flush()
        x = batch['id'].float().view(-1, 1) / 1000
        return torch.nn.functional.mse_loss(self.layer(x), 2 * x)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        x = batch['id'].float().view(-1, 1) / 1000
        self.log('val_loss', torch.nn.functional.mse_loss(self.layer(x), 2 * x), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main(config: dict) -> None:
    """Train (or resume) as CONFIG says."""
    run = config['run']
    os.makedirs(run, exist_ok=True)
    val_split = 'val' if config.get('val', True) else None
    data = StreamingDataModule(local=config['data'], split='train', val_split=val_split,  # noqa: F821 (from the page)
                               batch_size=config['batch'], num_workers=config['workers'], num_canonical_nodes=2,
                               persistent_workers=bool(config.get('persistent')))
    callbacks = []
    if config.get('save'):
        callbacks += [
            L.pytorch.callbacks.ModelCheckpoint(dirpath=os.path.join(run, 'steps'), filename='{step}',
                                                every_n_train_steps=5, save_top_k=-1),
            L.pytorch.callbacks.ModelCheckpoint(dirpath=os.path.join(run, 'epochs'), filename='{epoch}',
                                                save_on_train_epoch_end=True, save_top_k=-1)]
    trainer = L.Trainer(accelerator='cpu', devices=config['devices'], strategy=config['strategy'],
                        max_epochs=config['epochs'], logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=bool(callbacks), callbacks=callbacks,
                        num_sanity_val_steps=2)
    trainer.fit(Logged(run), datamodule=data, ckpt_path=config.get('ckpt'))


if __name__ == '__main__':
    main(json.loads(sys.argv[1]))
    end_distributed()
