"""The subcommands of ``treegen``, in the order of ``treegen --help``: name -> (the ``treegen.cli`` module
that defines its options and runs it, its help line).

Light on purpose (no imports): ``treegen --help``, ``--version`` and every command's parser start from
this table, and only the module of the command being run is imported (:func:`treegen.cli.main.build_parser`)."""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, str]] = {
    "fit": ("models", "induce a tree from a CSV dataset and save the model"),
    "predict": ("models", "predict a label for every row of a CSV file"),
    "eval": ("models", "accuracy, confusion matrix and per-class scores on labelled data"),
    "cv": ("models", "repeated stratified K-fold cross-validation"),
    "show": ("models", "print a model's tree"),
    "compare": ("compare", "compare algorithms/settings over datasets (Dask), with statistics"),
    "tune": ("tune", "search the most accurate model that fits a target's flash/RAM/time budget"),
    "import": ("imports", "import an XGBoost, CatBoost, Treelite, LightGBM, ONNX or (with --trust-pickle) "
                          "scikit-learn model"),
    "export": ("export", "generate fixed-point (Q15) or float32 C for a target"),
    "targets": ("targets", "list the targets code can be exported for"),
    "build": ("firmware", "write a PlatformIO project (model + firmware harness) and build it"),
    "flash": ("firmware", "upload the firmware to a board, or run it in its emulator (QEMU, simavr) "
                          "for an emulated target"),
    "hil": ("hil", "hardware in the loop: check a model's firmware on a device against the host"),
    "farm": ("farm", "board farm: the HIL of models x the targets of a labgrid farm's places, in parallel"),
    "plot": ("plot", "draw a model (tree, partition, confusion matrix) or cv/hil/tune reports"),
    "dataset": ("samples", "list the datasets shipped with treegen, or write one (NAME -o FILE)"),
}


def add_command(sub, name: str, **kwargs):
    """``sub.add_parser(name)`` with the command's help line from :data:`COMMANDS`."""
    return sub.add_parser(name, help=COMMANDS[name][1], **kwargs)
