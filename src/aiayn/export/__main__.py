"""`python -m aiayn.export`, as the console script aiayn-export: aiayn.export.cli."""

import sys

from aiayn.export.cli import main

sys.exit(main())
