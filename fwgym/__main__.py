"""``python -m fwgym ARGS``: the ``fwgym`` command (:func:`fwgym.cli.main`)."""
import sys

from fwgym.cli import main

sys.exit(main())
