"""PullAPIWrapper: client/impl/consumer/PullAPIWrapper.java of RocketMQ 4.9.x.

- which broker of a broker name the next pull of a queue goes to (pullFromWhichNodeTable: the
  broker's suggestWhichBrokerId of the last answer, the master at first);
- the PULL_MESSAGE request a PullRequest becomes (pullKernelImpl; the commit-offset flag
  cleared when the broker is a slave);
- processPullResult: the pull body decoded into the user's MessageExt records (in
  message_decoder.py, the consumer's MessageDecoder), tag-filtered again on the client.
"""

from __future__ import annotations

from protocol.bodies import MessageQueue
from protocol.codes import MASTER_ID, PullSysFlag


class PullAPIWrapper:
    """Per consumer group: broker choice per queue and the pull result's processing."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.pull_from_which_node: dict[MessageQueue, int] = {}

    def update_pull_from_which_node(self, mq: MessageQueue, broker_id: int) -> None:
        """Remember the broker the last answer suggested for mq."""
        self.pull_from_which_node[mq] = broker_id

    def recalculate_pull_from_which_node(self, mq: MessageQueue) -> int:
        """The broker id the next pull of mq goes to."""
        return self.pull_from_which_node.get(mq, MASTER_ID)


def build_sys_flag(commit_offset: bool, suspend: bool, subscription: bool, slave: bool) -> int:
    """PullSysFlag.buildSysFlag (class filter never), commit-offset cleared for a slave."""
    return PullSysFlag.build(commit_offset and not slave, suspend, subscription)

