"""The streaming-core demo: real data in, a model trained by streaming, a crash survived, determinism shown.

1. Write scikit-learn's handwritten digits (shipped with the package, nothing downloaded) to MDS shards in a
   local directory that stands in for a bucket (``demo-output/bucket``), compressed and hashed.
2. Stream the training split with shuffling into a small PyTorch model for a few epochs (progress bars); the run
   is interrupted mid-epoch, the loader's ``state_dict`` saved with the model, and resumed in a fresh process
   state: the resumed epoch yields exactly the samples not yet seen.
3. Show that the order is the same for 1 and 2 simulated ranks (same global batches).
4. Compare the accuracy with the same training on the in-memory arrays.

Run with ``make demo`` (or ``python examples/demo.py [--out DIR] [--epochs N]``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from tqdm.auto import tqdm

from streaming_core import StreamingDataLoader, StreamingDataset, World
from streaming_mds import MDSWriter

SEED = 17
BATCH = 32


def write_dataset(root: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Write train/test splits of the digits to ``root`` as MDS; return the arrays too."""
    digits = load_digits()
    images = digits.images.astype(np.uint8)  # 8x8, values 0..16
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(SEED).permutation(len(labels))
    split = int(len(labels) * 0.8)
    train, test = order[:split], order[split:]
    for name, ids in (('train', train), ('test', test)):
        columns = {'id': 'int', 'image': 'ndarray:uint8:8,8', 'label': 'int'}
        with MDSWriter(out=os.path.join(root, name), columns=columns, compression='zstd', hashes=['xxh3_64'],
                       size_limit='8kb', progress_bar=True) as writer:
            for i in ids.tolist():
                writer.write({'id': i, 'image': images[i], 'label': int(labels[i])})
    return images[train], labels[train], images[test], labels[test]


def make_model() -> nn.Module:
    """A small MLP, seeded."""
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
               labels: torch.Tensor) -> float:
    """One optimisation step; returns the loss."""
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(images.float() / 16.0), labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy on arrays."""
    with torch.no_grad():
        predicted = model(torch.from_numpy(images).float() / 16.0).argmax(1).numpy()
    return float((predicted == labels).mean())


def dataset(bucket: str, cache: str, **kwargs) -> StreamingDataset:
    """The streaming training set (the bucket is a local directory standing in for object storage)."""
    return StreamingDataset(remote=bucket, local=cache, split='train', batch_size=BATCH, shuffle=True,
                            shuffle_seed=SEED, num_canonical_nodes=2, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', default='demo-output', help='working directory (recreated)')
    parser.add_argument('--epochs', type=int, default=6)
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    bucket, cache = os.path.join(args.out, 'bucket'), os.path.join(args.out, 'cache')
    started = time.time()

    print('1. Writing scikit-learn digits to MDS (zstd, xxh3_64) ...')
    x_train, y_train, x_test, y_test = write_dataset(bucket)
    print(f'   {len(y_train)} train / {len(y_test)} test samples, '
          f'{len([n for n in os.listdir(os.path.join(bucket, "train")) if n.startswith("shard.")])} train shards')

    print(f'2. Streaming training for {args.epochs} epochs, interrupted in epoch 2 and resumed ...')
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = StreamingDataLoader(dataset(bucket, cache), batch_size=BATCH, num_workers=2)
    interrupted_at = None
    epoch = 0
    while epoch < args.epochs:
        seen = []
        bar = tqdm(loader, desc=f'   epoch {epoch}', unit='batch', leave=False)
        for step, batch in enumerate(bar):
            bar.set_postfix(loss=f'{train_step(model, optimizer, batch["image"], batch["label"]):.3f}')
            seen.extend(batch['id'].tolist())
            if epoch == 2 and interrupted_at is None and step == len(bar) // 2:
                interrupted_at = step + 1
                checkpoint = {'model': model.state_dict(), 'optimizer': optimizer.state_dict(),
                              'data': loader.state_dict()}
                break
        else:
            epoch += 1
            continue
        bar.close()
        print(f'   interrupted after {interrupted_at} batches: data state {checkpoint["data"]}')
        del loader  # the "crash": everything in memory is gone; only the checkpoint survives
        model = make_model()
        model.load_state_dict(checkpoint['model'])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        optimizer.load_state_dict(checkpoint['optimizer'])
        loader = StreamingDataLoader(dataset(bucket, cache), batch_size=BATCH, num_workers=2)
        loader.load_state_dict(checkpoint['data'])
        rest = [i for batch in _train_epoch(loader, model, optimizer, epoch) for i in batch['id'].tolist()]
        reference = dataset(bucket, cache)
        for _ in range(epoch + 1):
            full = [sample['id'] for sample in reference]  # the uninterrupted epoch, in order
        print(f'   resumed: {len(rest)} samples after {len(seen)} seen; seen + resumed equals the uninterrupted '
              f'epoch exactly: {seen + rest == full}')
        epoch += 1
    streamed = accuracy(model, x_test, y_test)

    print('3. Same order for 1 and 2 simulated ranks (global batch size 32, 2 canonical nodes):')
    one = dataset(bucket, cache).get_plan(World(rank=0, world_size=1), epoch=0)
    two_ds = StreamingDataset(remote=bucket, local=cache, split='train', batch_size=BATCH // 2, shuffle=True,
                              shuffle_seed=SEED, num_canonical_nodes=2)
    two = two_ds.get_plan(World(rank=0, world_size=2, local_world_size=1), epoch=0)
    one_batches = [sorted(b[b >= 0].tolist()) for b in one[0, 0, 0]]
    two_batches = []
    for j in range(two.shape[3]):
        merged = np.concatenate([two[0, 0, 0, j], two[1, 0, 0, j]])
        two_batches.append(sorted(merged[merged >= 0].tolist()))
    print(f'   first global batch, 1 rank : {one_batches[0][:10]} ...')
    print(f'   first global batch, 2 ranks: {two_batches[0][:10]} ...')
    print(f'   all {len(one_batches)} global batches identical: {one_batches == two_batches}')

    print('4. The same training on the in-memory arrays ...')
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(SEED)
    for _ in range(args.epochs):
        order = rng.permutation(len(y_train))
        for start in range(0, len(order), BATCH):
            ids = order[start:start + BATCH]
            train_step(model, optimizer, torch.from_numpy(x_train[ids]), torch.from_numpy(y_train[ids]))
    in_memory = accuracy(model, x_test, y_test)
    print(f'\nTest accuracy: streamed {streamed:.3f}   in memory {in_memory:.3f}   '
          f'({time.time() - started:.0f} s in all)')


def _train_epoch(loader, model, optimizer, epoch):
    bar = tqdm(loader, desc=f'   epoch {epoch} (resumed)', unit='batch', leave=False)
    for batch in bar:
        bar.set_postfix(loss=f'{train_step(model, optimizer, batch["image"], batch["label"]):.3f}')
        yield batch


if __name__ == '__main__':
    main()
