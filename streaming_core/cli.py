"""The ``streaming`` command line: one entry point, one subcommand per everyday task."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

__all__ = ['main', 'build_parser', 'COMMANDS']

#: Subcommand name -> module in ``streaming_core.tools.commands`` providing ``add_parser(subparsers)`` and
#: ``run(args)``.
COMMANDS = {
    'inspect': 'inspect',
    'verify': 'verify',
    'convert': 'convert',
    'merge-index': 'merge_index',
    'simulate': 'simulate',
    'cache': 'cache',
    'index': 'index',
    'plugins': 'plugins',
}


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used to generate the CLI reference in the docs)."""
    parser = argparse.ArgumentParser(
        prog='streaming',
        description='Write, inspect, verify and plan streaming datasets (streaming-core).',
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='Run "streaming <command> --help" for the options of one command.')
    from streaming_core import __version__
    parser.add_argument('--version', action='version', version=f'streaming-core {__version__}')
    subparsers = parser.add_subparsers(dest='command', metavar='<command>', required=True)
    for module_name in COMMANDS.values():
        module = importlib.import_module(f'streaming_core.tools.commands.{module_name}')
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `streaming cache --json | head`: the reader left; end quietly, as a killed writer would
        import os
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail again
        except (OSError, ValueError):
            pass
        return 141
    except Exception as err:  # a clear one-line error, not a traceback, for expected failures
        from streaming_core.errors import StreamingError
        if isinstance(err, (StreamingError, OSError, ValueError, LookupError)):
            print(f'streaming {args.command}: error: {err}', file=sys.stderr)
            return 1
        raise


if __name__ == '__main__':
    sys.exit(main())
