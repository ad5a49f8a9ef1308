"""`python -m deploy`: the actormq command line.

`python -m` puts the working directory first on sys.path (unless -P / PYTHONSAFEPATH, which
bin/actormq passes). It is taken off before anything else of ours is imported: a folder there
named like one of our packages (a store root called `store`) must not replace them, here or in
the actors forked from this process.
"""

import os
import sys

if not sys.flags.safe_path:
    _here = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", _here)]

from deploy.cli import main

sys.exit(main())
