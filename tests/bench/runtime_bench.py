"""The runtime alone: `python -m tests.bench.runtime_bench [actormq bench options]`.

The broker benchmark's A and B (deploy.bench.broker_bench) against the echo broker
(tests.support.echo_broker): channels, RemotingServer and processor actors without the real
processors or the store. Run from the checkout (the echo broker is no part of the package).
"""

from __future__ import annotations

import logging
import sys

from deploy.bench import broker_bench
from tests.support.echo_broker import ECHO_BROKER


def main(argv: list[str] | None = None) -> int:
    """broker_bench's options; the table of A and B against the echo broker."""
    args = broker_bench.build_parser().parse_args(argv)
    if args.runs < 1 or args.reference or args.bound:
        sys.stderr.write("runtime_bench: --runs >= 1, without --reference or --bound\n")
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sys.stdout.write(broker_bench.format_table(broker_bench.run(args, broker=ECHO_BROKER)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
