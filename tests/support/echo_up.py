"""`actormq` with the echo broker: `python -m tests.support.echo_up up ...` (from the checkout).

Runs deploy.cli.main unchanged, the launcher's broker actor class being the echo broker
(tests.support.echo_broker) in place of BrokerControllerActor: the subprocess tests of `up`
(signals, supervision, ports) exercise the runtime without the real processors. The swap is
made here, in this test process, on deploy.launch.start_broker's actor_class; the package has
no option for it.
"""

from __future__ import annotations

import functools
import sys

from deploy import cli, launch
from tests.support.echo_broker import ECHO_BROKER


def main(argv: list[str] | None = None) -> int:
    """deploy.cli.main with every broker started as the echo broker."""
    launch.start_broker = functools.partial(launch.start_broker, actor_class=ECHO_BROKER)
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
