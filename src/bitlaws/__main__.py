"""``python -m bitlaws``: runs :func:`bitlaws.cli.main` (the commands are listed by ``--help``)."""

import sys

from .cli import main

sys.exit(main())
