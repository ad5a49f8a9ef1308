"""Helpers for the end-to-end broker tests: request builders and bounded waits.

Requests are written the way RocketMQ 4.9.x clients write them (spec §3, §14): header fields
by their wire names, every value a string. The clusters come from
tests/integration/conftest.py's `local_cluster` fixture (the real broker); the only process
started here is an external client driver (run_driver), killed by its session id on timeout.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from actors.namesrv.config import NamesrvConfig
from deploy import launch, procinfo
from deploy.bench.requests import create_topic_cmd, pull_cmd, simple_cmd
from deploy.wire import BlockingClient
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.message_batch import BatchItem, encode_batch
from protocol.message_client_id_setter import create_uniq_id
from protocol.message_properties import properties_to_string
from protocol.record import java_string_hash

log = logging.getLogger(__name__)

T = TypeVar("T")

# small files: tests must not map 1 GiB commit logs or 420 MB index files
SMALL_STORE: dict[str, str] = {
    "mappedFileSizeCommitLog": str(4 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(6000 * 20),
    "maxHashSlotNum": "4096",
    "maxIndexNum": "16384",
}
SERIALIZE_TYPES = (SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK)
RPC_TIMEOUT_S = 10.0


def start_real(local_cluster: Callable[..., launch.LocalCluster], **props: str
               ) -> launch.LocalCluster:
    """A name server + the REAL broker (H5's cores) with small store files."""
    merged = dict(SMALL_STORE)
    merged.update(props)
    return local_cluster(broker=launch.BROKER_CONTROLLER, broker_props=merged)


def run_driver(argv: list[str], out_base: Path, wall_timeout_s: float, *,
               env: dict[str, str] | None = None, cwd: Path | None = None
               ) -> tuple[int | None, list[dict[str, Any]], str]:
    """Run a client driver, output in files: (exit code or None on timeout, JSON lines, stderr).

    The driver runs in its own session and is killed by that session's id (its pid) if it
    outlives wall_timeout_s.
    """
    out_path, err_path = out_base.with_suffix(".out"), out_base.with_suffix(".err")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True)
        try:
            code: int | None = proc.wait(wall_timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    events = []
    for line in out_path.read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                log.warning("driver printed a broken JSON line: %.200s", line)
    return code, events, err_path.read_text(errors="replace")[-3000:]


def assert_store_clean(store_root: Path | str, **props: str) -> None:
    """Open a stopped broker's store (SMALL_STORE + props) as its writer would, and require
    check() to find nothing wrong; the store is shut down again after."""
    from store.config import StoreConfig
    from store.message_store import DefaultMessageStore

    merged = dict(SMALL_STORE, storePathRootDir=str(store_root))
    merged.update(props)
    ds = DefaultMessageStore(StoreConfig.from_properties(merged))
    now = int(time.time() * 1000)
    assert ds.load(now)
    try:
        assert ds.check() == []
    finally:
        ds.shutdown(now)


def broker_addr(cluster: launch.LocalCluster) -> tuple[str, int]:
    """The broker's client address."""
    return ("127.0.0.1", cluster.broker_port())


def namesrv_addr(cluster: launch.LocalCluster) -> tuple[str, int]:
    """The name server's address."""
    assert cluster.namesrv_port is not None
    return ("127.0.0.1", cluster.namesrv_port)


def wait_until(fn: Callable[[], T | None], timeout_s: float, step_s: float = 0.1) -> T | None:
    """Call fn until it returns something truthy or timeout_s passes (bounded); last value."""
    deadline = time.monotonic() + timeout_s
    value = fn()
    while not value and time.monotonic() < deadline:
        time.sleep(step_s)
        value = fn()
    return value


# -- request builders --------------------------------------------------------------------------
def msg_props(tags: str | None = None, keys: str | None = None, uniq: str | None = None,
              wait: bool = True) -> dict[str, str]:
    """A producer's properties: UNIQ_KEY, WAIT, TAGS, KEYS."""
    props = {"UNIQ_KEY": uniq or create_uniq_id(), "WAIT": "true" if wait else "false"}
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = keys
    return props


def send_cmd(topic: str, body: bytes, props: dict[str, str], *, queue_id: int = 0,
             code: int = 310, serialize_type: int = SerializeType.JSON,
             group: str = "e2e_pg", default_topic: str = "TBW102", flag: int = 0,
             batch: bool = False, oneway: bool = False) -> RemotingCommand:
    """SEND_MESSAGE_V2 (310/320, one-letter keys) or SEND_MESSAGE (10, long names)."""
    fields = {
        "producerGroup": group, "topic": topic, "defaultTopic": default_topic,
        "defaultTopicQueueNums": "4", "queueId": str(queue_id), "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)), "flag": str(flag),
        "properties": properties_to_string(props), "reconsumeTimes": "0",
        "unitMode": "false",
    }
    if code == 10:
        ext = fields
    else:
        letters = "abcdefghijk"
        ext = {letters[i]: v for i, v in enumerate(fields.values())}
        ext["m"] = "true" if batch else "false"
    return RemotingCommand.request(code, ext, body, serialize_type=serialize_type, oneway=oneway)


def batch_cmd(topic: str, items: list[BatchItem], *, queue_id: int = 0,
              serialize_type: int = SerializeType.JSON) -> RemotingCommand:
    """SEND_BATCH_MESSAGE (320) with `m`=true, batch-level properties WAIT=true."""
    return send_cmd(topic, encode_batch(items), {"WAIT": "true"}, queue_id=queue_id, code=320,
                    serialize_type=serialize_type, batch=True)


def heartbeat_cmd(client_id: str, group: str | None, topics: dict[str, str],
                  serialize_type: int = SerializeType.JSON,
                  producer_groups: tuple[str, ...] = ()) -> RemotingCommand:
    """HEART_BEAT (34) as a Java client writes it: a push consumer of `group` (none when
    None; topics maps topic -> subString) and the producer groups, CLIENT_INNER_PRODUCER last."""
    subs = []
    for topic, sub in topics.items():
        tags = [] if sub == "*" else [t.strip() for t in sub.split("||") if t.strip()]
        subs.append({"classFilterMode": False, "codeSet": [java_string_hash(t) for t in tags],
                     "expressionType": "TAG", "subString": sub, "subVersion": 1,
                     "tagsSet": tags, "topic": topic})
    consumers = [] if group is None else [
        {"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
         "groupName": group, "messageModel": "CLUSTERING", "subscriptionDataSet": subs,
         "unitMode": False}]  # fmt: skip
    body = {"clientID": client_id, "consumerDataSet": consumers,
            "producerDataSet": [{"groupName": g}
                                for g in (*producer_groups, "CLIENT_INNER_PRODUCER")]}
    data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    return RemotingCommand.request(34, None, data, serialize_type=serialize_type)


def get_route(ns: tuple[str, int], topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC (105) at a name server (fresh connection)."""
    with BlockingClient(ns) as cl:
        return cl.invoke(simple_cmd(105, topic=topic), RPC_TIMEOUT_S)


def wait_route(ns: tuple[str, int], topic: str, want: bool, timeout_s: float
               ) -> RemotingCommand:
    """Poll GET_ROUTEINFO_BY_TOPIC until it succeeds (want) / fails (not want); last answer."""
    last: list[RemotingCommand] = []

    def probe() -> bool:
        r = get_route(ns, topic)
        last[:] = [r]
        return (r.code == 0) == want

    wait_until(probe, timeout_s, 0.2)
    return last[0]


def start_namesrv_with(cluster: launch.LocalCluster, config: NamesrvConfig,
                       idle_s: float = 120.0) -> int:
    """A second NameServer actor in `cluster` with its own NamesrvConfig."""
    from actors.namesrv.actor import NameServerActor
    from actors.runtime.messages import NamesrvStarted, NamesrvStartFailed, StartNamesrv

    addr = cluster.asys.createActor(NameServerActor)
    cluster.asys.tell(addr, StartNamesrv("127.0.0.1", 0, config, idle_s))
    reply = launch._await(cluster.asys, (NamesrvStarted, NamesrvStartFailed), 60.0)
    if not isinstance(reply, NamesrvStarted):
        raise RuntimeError(f"name server failed to start: {reply!r}")
    return int(reply.port)


def start_up_process(tmp_path: Path, env: dict[str, str] | None = None, console_port: int = -1,
                     **props: str) -> tuple[Any, int, int, Path]:  # fmt: skip
    """`python -m deploy up` as a subprocess: the real broker with SMALL_STORE + props (its
    -c file), on explicit free ports, `env` added to its environment, its console on
    `console_port` (-1: none); (MarkedProcess, name server port, broker port, data dir).
    Its actors' log (data dir / actormq.log) is complete, which a cluster started inside the
    pytest process does not guarantee once earlier tests imported the actor modules (a forked
    actor's module loggers still point at the launcher's logging). The caller stops it."""
    from tests.integration.conftest import MarkedProcess

    ns = launch.stable_free_port()
    broker = launch.stable_free_port(pair=True, avoid={ns, ns - 1})  # HA: broker + 1
    conf = tmp_path / "up.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in {**SMALL_STORE, **props}.items()))
    data = tmp_path / "data"
    argv = [sys.executable, "-m", "deploy", "up", "--data", str(data), "-c", str(conf),
            "--namesrv-port", str(ns), "--broker-port", str(broker),
            "--spark-bridge-port", "0", "--console-port", str(console_port)]  # fmt: skip
    run = MarkedProcess(argv, tmp_path / "up", os.getcwd(), env)
    try:
        run.wait_for(f"listening on 127.0.0.1:{broker} (", 60.0)
    except BaseException:
        run.stop()
        raise
    return run, ns, broker, data


def closed_by_server(sock: socket.socket, timeout_s: float = 5.0) -> bool:
    """True when the server closes the connection within timeout_s (bounded reads)."""
    sock.settimeout(timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


def comm(pid: int) -> str:
    """The process name (/proc/<pid>/comm)."""
    try:
        with open(f"/proc/{pid}/comm", encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def ppid(pid: int) -> int:
    """The parent process id (0 when gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def role_pids(pids: list[int], role: str) -> list[int]:
    """The live processes named amq-<role> (15 characters at most) among `pids` whose parent
    is one of them too: a child just forked bears its parent's name until it names itself,
    and a process whose parent died is on its way out: neither is counted."""
    name = ("amq-" + role)[:15]
    return [p for p in pids if comm(p) == name and ppid(p) in pids
            and comm(ppid(p)) != name and not procinfo.is_zombie(p)]  # fmt: skip


OUR_PACKAGES = ("actors", "store", "protocol", "deploy", "tests")


def hostile_workdir(path: Path) -> Path:
    """A working directory holding folders named like our packages: `store/commitlog/` (what
    stands in the parent of a store root named `store`) and, for the others, packages whose
    import fails loudly. A process of ours started there must import none of them."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "store" / "commitlog").mkdir(parents=True, exist_ok=True)
    (path / "store" / "commitlog" / "00000000000000000000").write_bytes(b"\0" * 64)
    for name in OUR_PACKAGES:
        if name == "store":
            continue
        (path / name).mkdir(exist_ok=True)
        (path / name / "__init__.py").write_text(
            f"raise ImportError('{name} imported from the working directory {path}')\n")
    return path


def create_topic_pullable(cluster: launch.LocalCluster, topic: str, queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC, then wait (bounded) until the pull group serves the topic."""
    with BlockingClient(broker_addr(cluster)) as cl:
        resp = cl.invoke(create_topic_cmd(topic, queues), RPC_TIMEOUT_S)
        assert resp.code == 0, resp.remark
        wait_pullable(cl, topic)


def wait_pullable(cl: BlockingClient, topic: str) -> None:
    """Topic configs replicate through the controller: wait until a pull stops answering 17."""
    def ready() -> bool:
        return cl.invoke(pull_cmd("probe_cg", topic, 0, 0), RPC_TIMEOUT_S).code != 17

    assert wait_until(ready, 10.0, 0.05), f"pull group never learned topic {topic}"


def pull_e2e(cl: BlockingClient, topic: str, qid: int, offset: int, **kw: object):
    return cl.invoke(pull_cmd("e2e_cg", topic, qid, offset, **kw), RPC_TIMEOUT_S)


def consume_until(namesrv: str, group: str, topic: str, want: set[bytes], timeout_s: float = 30.0,
                  **settings: Any) -> set[bytes]:  # fmt: skip
    """Our PushConsumer (from the first offset, `settings` besides) until it has handled every
    body of `want` or timeout_s passes; closed (a traced one sends its records then); the
    bodies of `want` it got."""
    from actors.client import ConsumeResult, PushConsumer

    got: set[bytes] = set()

    def handle(msgs: tuple[Any, ...]) -> ConsumeResult:
        got.update(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    c = PushConsumer(group, namesrv=namesrv, handler=handle, consume_from="first", **settings)
    c.subscribe(topic, "*")
    c.start()
    try:
        deadline = time.monotonic() + timeout_s
        while not want <= got and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        c.close()
    return got & want
