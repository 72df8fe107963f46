"""Guard torchvision's fake-kernel registrations for ``nms``/``qnms`` (run with the reference venv's python).

The PyPI torchvision wheel is linked against CUDA torch; next to the local CPU torch its C++ ops do not load, and
``torch.library.register_fake('torchvision::nms')`` then raises ``operator torchvision::nms does not exist`` at
import time. ``import streaming`` imports torchvision, so the reference cannot even be imported. This rewrites the
two decorators so they apply only when ``torchvision.extension._has_ops()`` is true. Idempotent; touches only the
interpreter's own site-packages (the reference side-virtualenv).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

OPS = ('nms', 'qnms')
GUARD = '@(torch.library.register_fake("torchvision::{op}") if torchvision.extension._has_ops() else (lambda fn: fn))'


def patch(path: pathlib.Path) -> bool:
    """Rewrite ``path`` in place; return True when something changed."""
    text = path.read_text()
    new = text
    for op in OPS:
        plain = f'@torch.library.register_fake("torchvision::{op}")'
        guarded = GUARD.format(op=op)
        if guarded in new:
            continue
        if plain not in new:
            raise SystemExit(f'{path}: decorator {plain!r} not found; torchvision changed, update compat/')
        new = new.replace(plain, guarded)
    if new != text:
        path.write_text(new)
        return True
    return False


def main() -> int:
    """Locate torchvision without importing it (importing it is what fails) and patch it."""
    spec = importlib.util.find_spec('torchvision')
    if spec is None or not spec.submodule_search_locations:
        print('torchvision is not installed: nothing to patch', file=sys.stderr)
        return 0
    target = pathlib.Path(list(spec.submodule_search_locations)[0]) / '_meta_registrations.py'
    if not target.exists():
        print(f'{target} does not exist: nothing to patch', file=sys.stderr)
        return 0
    changed = patch(target)
    print(f'{target}: {"patched" if changed else "already patched"}', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
