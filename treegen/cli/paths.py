"""Which options and arguments of a command are files it reads or writes, declared where they are
defined (``input_(p.add_argument(...), "model")``, ``output(p.add_argument(...), "JSON file")``), and
the one check that runs for every command before it does any work: no output may be an input, or
hold one (:func:`treegen.core.output.check_paths`); ``-`` for a text output is standard output, and
the command's report then goes to standard error."""

from __future__ import annotations

import argparse
import contextlib

from treegen.core.output import STDOUT, Output, check_paths, stdout_for_data
from treegen.core.targets import targets_dir

#: what an input argument holds (the reliability tests pick a file of that kind for it)
INPUT_KINDS = ("model", "data", "model-or-data", "dataset", "report", "params", "target",
               "foreign-model")   # another library's model file (treegen import)


def input_(action: argparse.Action, kind: str) -> argparse.Action:
    """Mark ``action`` as a file the command reads (``kind``: one of :data:`INPUT_KINDS`)."""
    if kind not in INPUT_KINDS:
        raise ValueError(f"input kind must be one of {INPUT_KINDS}, got {kind!r}")
    action.treegen_input = kind
    return action


def output(action: argparse.Action, what: str, kind: str = "text") -> argparse.Action:
    """Mark ``action`` as a path the command writes: ``what`` names it in messages; ``kind`` as
    :class:`treegen.core.output.Output` (text: ``-`` = standard output; binary, folder, file: not)."""
    Output("", what, kind)          # validates the kind
    action.treegen_output = (what, kind)
    if kind == "text" and action.help and "'-'" not in action.help:
        action.help += " ('-': standard output; the report then goes to standard error)"
    return action


def subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``command`` of the top-level ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]
    raise KeyError(command)


def _values(value) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def declared(sub: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list[Output], list[str]]:
    """(outputs, inputs) of a parsed command line, from its parser's declarations."""
    outputs, inputs = [], []
    for action in sub._actions:
        value = getattr(args, action.dest, None)
        if hasattr(action, "treegen_output"):
            what, kind = action.treegen_output
            outputs += [Output(v, what, kind) for v in _values(value)]
        if hasattr(action, "treegen_input"):
            inputs += [_target_file(v) if action.treegen_input == "target" else v for v in _values(value)]
    if args.command == "targets":           # it reads every shipped target file
        inputs += [str(p) for p in sorted(targets_dir().glob("*.toml"))]
    return outputs, inputs


def _target_file(value: str) -> str:
    """The file a ``--target`` value reads: a path ending in .toml, or a shipped target's file."""
    return value if value.endswith(".toml") else str(targets_dir() / f"{value}.toml")


def check_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """Check the command's outputs against its inputs (one-line :class:`TreegenError`, before any work);
    returns the context to run it in (standard output kept for the data when an output is ``-``)."""
    outputs, inputs = declared(subparser(parser, args.command), args)
    check_paths(outputs, inputs)
    return stdout_for_data(any(str(o.path) == STDOUT for o in outputs))
