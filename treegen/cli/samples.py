"""``treegen dataset``: list the datasets shipped with the package, or write one to a file."""

from __future__ import annotations

import gzip

from treegen.cli.commands import add_command
from treegen.cli.common import CLIError, table
from treegen.cli.paths import output
from treegen.core.atomic import atomic_write
from treegen.core.errors import TreegenError
from treegen.core.samples import SAMPLES, sample, sample_path


def register(sub) -> None:
    """Add dataset to the subcommands ``sub``."""
    p = add_command(sub, "dataset")
    p.add_argument("name", nargs="?", metavar="NAME", help=f"a shipped dataset: {', '.join(SAMPLES)}")
    output(p.add_argument("-o", "--output", metavar="FILE",
                          help="where to write it: a .csv.gz file is written compressed, any other name as "
                               "plain CSV"), "dataset file", "binary")
    p.set_defaults(func=cmd_dataset)


def cmd_dataset(args) -> int:
    if args.name is None:
        if args.output is not None:
            raise CLIError("-o needs a dataset NAME (see 'treegen dataset --help')")
        print(table([["name", "what"]] + [[s.name, s.description] for s in SAMPLES.values()], align_left=2))
        return 0
    s = sample(args.name)
    if args.output is None:
        raise CLIError(f"dataset {s.name}: -o FILE says where to write it (see 'treegen dataset --help')")
    packed = sample_path(s.name).read_bytes()
    try:
        atomic_write(args.output, packed if str(args.output).endswith(".gz") else gzip.decompress(packed))
    except OSError as exc:
        raise TreegenError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {args.output}  ({s.description})")
    return 0

