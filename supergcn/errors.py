"""The one exception type that the command line reports as a clean, single-line error."""


class SuperGCNError(Exception):
    """A problem with the user's input or environment, with the fix in its message.

    The CLI prints ``supergcn <command>: error: <message>`` and exits with status 2 for these;
    any other exception is a bug and keeps its traceback.
    """
