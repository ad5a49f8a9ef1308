"""The base of the client's service actors, as common/ServiceThread.java is of PullMessageService
and RebalanceService (RocketMQ 4.9.x); MQClientInstanceActor shares it too.

Each such actor owns one RemotingClient (its broker and name-server connections) and one channel
to the user's process, both watched from the actor's own epoll (WatchingActor): a ready channel
is read by the subclass, a ready socket is served by the remoting client, and after every pass
whatever could not be written yet is retried shortly.
"""

from __future__ import annotations

from typing import Any, Final

from actors.client import client_channel as ch
from actors.client.client_config import ClientConfig
from actors.client.frame_ring import PullRings
from actors.client.mq_client_api import MQClientAPI
from actors.client.remoting_client import RemotingClient, RequestProcessor
from actors.runtime.watch import WatchingActor

FLUSH_RETRY_MS: Final = 1.0


class ServiceThreadActor(WatchingActor):
    """A WatchingActor serving one remoting client and one channel to the user's process."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.remoting: RemotingClient | None = None
        self.api: MQClientAPI | None = None
        self.channel: ch.ChannelEnd | None = None

    def _connect(self, config: ClientConfig, channel_path: str, channel_name: str,
                 processor: RequestProcessor | None = None,
                 rings: PullRings | None = None) -> None:  # fmt: skip
        """Make the remoting client (broker requests go to processor; its connections read
        into rings when given) and the MQClientAPI over it, and connect the channel to the
        user's process."""
        self.remoting = RemotingClient(processor=processor, tls=config.tls, rings=rings)
        self.remoting.on_connection_change = self._rewatch
        self.api = MQClientAPI(self.remoting, config)
        self.channel = ch.ChannelEnd.connect(channel_path, channel_name)

    def _read_channel(self, end: ch.ChannelEnd) -> None:
        """Read and act on the records the user's process wrote."""
        raise NotImplementedError

    def _rewatch(self) -> None:
        fds = [] if self.remoting is None else self.remoting.fds()
        if self.channel is not None and not self.channel.closed:
            fds.append(self.channel.fd)
        self.set_watch_fds(fds)

    def on_ready(self, fds: list[int]) -> None:
        end, remoting = self.channel, self.remoting
        for fd in fds:
            if end is not None and fd == end.fd:
                self._read_channel(end)
            elif remoting is not None:
                remoting.handle_ready(fd)
        self._after_pass()

    def _after_pass(self) -> None:
        left = False
        if self.remoting is not None and not self.remoting.flush_all():
            left = True
        if self.channel is not None and not self.channel.closed and not self.channel.flush():
            left = True
        if left:
            self.schedule("flush", FLUSH_RETRY_MS)

    def on_exit(self) -> None:
        if self.remoting is not None:
            self.remoting.close()
        if self.channel is not None:
            self.channel.close()
