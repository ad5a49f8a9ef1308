"""Start a RocketMQ C++ push consumer (librocketmq, through its ctypes binding) and keep it up.

Runs in a client virtualenv made by tests/clients/setup_cpp_clients.sh. Prints {"event":
"started"} once the consumer runs, then stays up for <seconds> so a test can ask the broker
about it (GET_CONSUMER_RUNNING_INFO is relayed to this client, which answers it itself).

Usage: python cpp_consumer_hold.py <namesrv host:port> <topic> <group> <seconds>
"""

from __future__ import annotations

import json
import os
import sys
import time

import rocketmq.client as rc


def main() -> None:
    namesrv, topic, group, seconds = sys.argv[1:5]
    consumer = rc.PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, lambda msg: None)
    consumer.start()
    sys.stdout.write(json.dumps({"event": "started"}) + "\n")
    sys.stdout.flush()
    time.sleep(float(seconds))
    os._exit(0)  # as cpp_roundtrip.py: some librocketmq builds crash in their consumer shutdown


if __name__ == "__main__":
    main()
