"""``python -m kpax.cli``: the `kpax` command.

Imports: kpax.cli.main.
"""

import sys

from kpax.cli.main import main

sys.exit(main())
