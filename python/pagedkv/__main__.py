"""``python -m pagedkv ...`` runs the ``pagedkv`` program, like the console script."""

import sys

from pagedkv._cli import main

sys.exit(main())
