"""`python -m aiayn.export`: aiayn.export.cli."""

import sys

from aiayn.export.cli import main

sys.exit(main())
