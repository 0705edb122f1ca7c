"""``treegen targets``: the list of targets (``targets/*.toml``). Imports no numerical library: it
answers as fast as ``treegen --version``."""

from __future__ import annotations

from treegen.cli.commands import add_command
from treegen.cli.common import table
from treegen.cli.paths import output
from treegen.core.output import write_json
from treegen.core.targets import all_targets


def register(sub) -> None:
    """Add targets to the subcommands ``sub``."""
    p = add_command(sub, "targets")
    output(p.add_argument("--json", metavar="FILE",
                          help="also write the targets (every field of targets/*.toml) as JSON"), "JSON file")
    p.set_defaults(func=cmd_targets)


def cmd_targets(args) -> int:
    targets = all_targets()
    rows = [["name", "kind", "core", "FPU", "DSP", "flash", "RAM", "description"]]
    for t in targets:
        rows.append([t.name, t.kind, t.core, "yes" if t.fpu else "no", "yes" if t.dsp else "no",
                     f"{t.flash_kb} KiB", f"{t.ram_kb} KiB", t.description])
    print(table(rows, align_left=8))
    write_json(args.json, {"command": "targets", "targets": [t.to_dict() for t in targets]})
    return 0
