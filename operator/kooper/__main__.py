"""``python -m kooper``: the same as the ``kooper`` console script."""

import sys

from kooper import cli

sys.exit(cli.main())
