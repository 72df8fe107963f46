"""A Hugging Face Trainer run that logs every sample id: ``torchrun ... -m tests.trainers.hf_client CONFIG``.

CONFIG (JSON): ``data``, ``run``, ``batch`` (per device), ``accumulate``, ``max_steps``, ``steps_per_epoch``
(optimizer steps), ``workers``, ``ckpt`` (a checkpoint directory to resume from, or null), ``save`` (a checkpoint
after every step), ``trainer`` (``'streaming'`` for our StreamingTrainer, ``'plain'`` for ``transformers.Trainer``).
Evaluation runs at each epoch end; rank 0 writes the evaluated sample ids (after accelerate's de-duplication) to
``eval-{global step}.json``. Each rank writes its native thread count at the start and after the teardown of
``docs/guide/huggingface.md`` to ``threads-rank{rank}.json``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from streaming_core import StreamingDataset
from streaming_core.tools.integrations.huggingface import StreamingTrainer
from tests.trainers.teardown import end_distributed, native_threads


class Linear(torch.nn.Module):
    """One Linear layer; training batches' sample ids go to ``log-rank{rank}.jsonl`` with the step they train."""

    def __init__(self, run: str, rank: int, steps_per_epoch: int) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.path = os.path.join(run, f'log-rank{rank}.jsonl')
        self.steps_per_epoch = steps_per_epoch
        self.step = 0

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.training:
            record = {'epoch': self.step // self.steps_per_epoch, 'step': self.step, 'ids': labels.tolist()}
            with open(self.path, 'a') as handle:
                handle.write(json.dumps(record) + '\n')
        out = self.layer(x.view(-1, 1))
        return {'loss': torch.nn.functional.mse_loss(out, 2 * x.view(-1, 1)), 'logits': out}


class StepOf(TrainerCallback):
    """Tell the model which optimizer step the next batches train."""

    def __init__(self, model: Linear) -> None:
        self.model = model

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.model.step = state.global_step


def collate(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """The sample ids as labels (for the log and the evaluated ids) and as the input."""
    ids = torch.tensor([int(s['id']) for s in samples])
    return {'x': ids.float() / 1000, 'labels': ids}


def main(config: dict[str, Any]) -> None:
    """Train (or resume) as CONFIG says."""
    run = config['run']
    rank = int(os.environ.get('RANK', '0'))
    os.makedirs(run, exist_ok=True)
    args = TrainingArguments(
        output_dir=os.path.join(run, 'out'), use_cpu=True, ddp_backend='gloo',
        per_device_train_batch_size=config['batch'], per_device_eval_batch_size=16,
        gradient_accumulation_steps=config['accumulate'], max_steps=config['max_steps'],
        save_strategy='steps' if config.get('save') else 'no', save_steps=1, eval_strategy='epoch',
        logging_strategy='no', report_to=[], remove_unused_columns=False, dataloader_num_workers=config['workers'],
        learning_rate=0.01, seed=0, disable_tqdm=True)
    common = dict(local=config['data'], batch_size=config['batch'], num_canonical_nodes=2)
    train = StreamingDataset(split='train', shuffle=True, **common)
    val = StreamingDataset(split='val', **common)
    model = Linear(run, rank, config['steps_per_epoch'])

    def compute_metrics(prediction: Any) -> dict[str, float]:
        ids = [int(i) for i in prediction.label_ids.reshape(-1).tolist()]
        if rank == 0:
            name = f'eval-{trainer.state.global_step}.json'
            with open(os.path.join(run, name), 'w') as handle:
                json.dump(ids, handle)
        return {'count': float(len(ids))}

    cls = StreamingTrainer if config['trainer'] == 'streaming' else Trainer
    trainer = cls(model=model, args=args, train_dataset=train, eval_dataset=val, data_collator=collate,
                  compute_metrics=compute_metrics, callbacks=[StepOf(model)])
    trainer.train(resume_from_checkpoint=config.get('ckpt'))


if __name__ == '__main__':
    CONFIG = json.loads(sys.argv[1])
    threads = {'start': native_threads()}
    main(CONFIG)
    end_distributed()
    threads['end'] = native_threads()
    with open(os.path.join(CONFIG['run'], f'threads-rank{os.environ.get("RANK", "0")}.json'), 'w') as handle:
        json.dump(threads, handle)
