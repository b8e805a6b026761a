"""``python -m fwgym.cli ARGS``: the ``fwgym`` command."""
import sys

from fwgym.cli import main

sys.exit(main())
