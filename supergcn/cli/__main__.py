"""``python -m supergcn.cli``: how the pipeline's rules call the command line."""

import sys

from supergcn.cli import entry

sys.exit(entry())
