"""``python -m paretosearch.cli``: the ``paretosearch`` command."""

import sys

from paretosearch.cli.main import main

sys.exit(main())
