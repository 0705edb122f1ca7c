"""User-facing errors.

Every problem caused by the user's input (a file, an option, a model) is raised as a
:class:`TreegenError`. The CLI turns it into a single line on stderr and exit code 2;
library users get an ordinary exception. It subclasses :class:`ValueError` so that
scikit-learn style callers see the exception type they expect.
"""


class TreegenError(ValueError):
    """A clear, one-line problem with the user's input."""


class DataError(TreegenError):
    """A data file or array that cannot be used."""


class ModelFileError(TreegenError):
    """A model file that is missing, corrupt or of an unsupported version."""
