"""`python -m deploy`: the actormq command line."""

import sys

from deploy.cli import main

sys.exit(main())
