"""``python -m causalkit`` runs the command-line interface."""

import sys

from causalkit.cli import main

sys.exit(main())
