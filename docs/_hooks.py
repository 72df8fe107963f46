"""mkdocs hooks: generate the hook reference from hookspecs.py and the CLI reference from the parser."""

from __future__ import annotations

import inspect
from typing import Any


def hook_reference_markdown() -> str:
    """Markdown for every hook spec: its signature and docstring."""
    from streaming_core import hookspecs
    from streaming_core.machinery.lookup import KINDS
    lines = []
    for kind, name in KINDS.items():
        function = getattr(hookspecs, name)
        doc = inspect.cleandoc(function.__doc__ or '')
        lines += [f'## `{name}`', '', f'Kind: **{kind}**. Signature: `{name}{inspect.signature(function)}`', '',
                  doc.replace('Example::', 'Example:').replace('\n    ', '\n    '), '']
    return '\n'.join(lines)


def cli_reference_markdown() -> str:
    """Markdown with the --help text of the CLI and of each subcommand."""
    import argparse

    from streaming_core.cli import build_parser
    parser = build_parser()
    lines = ['## `streaming`', '', '```text', parser.format_help().rstrip(), '```', '']

    def subcommands(command: argparse.ArgumentParser, prefix: str) -> Any:
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield f'{prefix} {name}', sub
                    yield from subcommands(sub, f'{prefix} {name}')

    for name, sub in subcommands(parser, 'streaming'):
        level = '##' if name.count(' ') == 1 else '###'
        lines += [f'{level} `{name}`', '', '```text', sub.format_help().rstrip(), '```', '']
    return '\n'.join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the generation markers."""
    if '<!-- HOOKSPECS -->' in markdown:
        markdown = markdown.replace('<!-- HOOKSPECS -->', hook_reference_markdown())
    if '<!-- CLI -->' in markdown:
        markdown = markdown.replace('<!-- CLI -->', cli_reference_markdown())
    return markdown
