"""SparkBridge core: the one place that plans Spark partitions of RocketMQ topics.

Mirrors a RocketMQ request processor (remoting NettyRequestProcessor, as namesrv's
DefaultRequestProcessor serves its codes) for actormq's own SparkBridgeCode requests: a Spark
driver asks for a batch read's partitions, a stream's first offsets, the end of its next
micro-batch (read limit and Trigger.AvailableNow cap applied), that micro-batch's partitions,
and reports its commits; `actormq spark list` asks for the registry. To answer, the core asks
the cluster (actors.spark_bridge.lookups: routes from a name server, queue offsets from each
master) and never touches a message on the read path: executors pull their ranges themselves.

Sans-IO: process() starts a job (a generator of lookups); the actor sends the job's Calls,
hands back each answer through on_response (or on_conn_lost / the deadline in tick), and the
reply goes to the Spark connection through the Outbox. Time is passed in.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Final

from actors.core import Outbox, Request
from actors.spark_bridge import lookups, planner
from actors.spark_bridge.lookups import BridgeError, Call, CallFailed, Result
from actors.spark_bridge.options import (
    EARLIEST,
    LATEST,
    SourceOptionError,
    SourceOptions,
    credentials_of,
    parse_source_options,
)
from actors.spark_bridge.planner import DataLossError, PlanError, QueueKey, QueueRange
from actors.spark_bridge.registry import QueryInfo, QueryRegistry
from actors.spark_bridge.wire import BadBody, loads, ok
from protocol.acl import SessionCredentials
from protocol.codes import RequestCode, ResponseCode, SparkBridgeCode
from protocol.command import RemotingCommand
from protocol.headers import DeleteKVConfigRequestHeader, PutKVConfigRequestHeader

log = logging.getLogger(__name__)

KV_NAMESPACE: Final = "ACTORMQ_SPARK"  # the name server KV entry drivers find the bridge by
KV_KEY: Final = "bridgeAddr"
CALL_TIMEOUT_MS: Final = 5000
REGISTER_PERIOD_MS: Final = 30_000  # re-put the KV entry (a name server may have restarted)
EXPIRE_PERIOD_MS: Final = 10_000

Job = Generator[list[Call], list[Result], Any]
SC = SparkBridgeCode


@dataclass(slots=True)
class _Running:
    """A job waiting for the answers to its calls."""

    gen: Job
    conn_id: int | None  # the Spark connection to answer (None: an internal job)
    request: RemotingCommand | None
    results: list[Result | None]
    waiting: int
    deadline_ms: int
    label: str
    credentials: SessionCredentials | None = None  # the job's ACL keys: its calls are signed


class SparkBridgeCore:
    """Plans partitions, tracks attached queries, registers itself with the name servers."""

    def __init__(self, name_servers: tuple[str, ...], advertise: str, outbox: Outbox, *,
                 call_timeout_ms: int = CALL_TIMEOUT_MS,
                 registry: QueryRegistry | None = None,
                 credentials: SessionCredentials | None = None) -> None:  # fmt: skip
        self.name_servers = name_servers
        # the bridge's own ACL keys: its KV entry is a name-server write (an admin account)
        self.credentials = credentials
        self.advertise = advertise  # host:port drivers reach this bridge at
        self.outbox = outbox
        self.call_timeout_ms = call_timeout_ms
        self.registry = registry or QueryRegistry()
        self.calls_out: list[Call] = []  # drained by the actor (take_calls)
        self._jobs: dict[int, _Running] = {}
        self._pending: dict[int, tuple[int, int, str]] = {}  # opaque -> (job, index, addr)
        self._ids = itertools.count(1)
        self._next_register_ms = 0
        self._next_expire_ms = 0
        self.handlers: dict[int, Callable[[Request, dict[str, Any], int], Job | RemotingCommand]]
        self.handlers = {
            SC.SPARK_PLAN_BATCH: self._plan_batch, SC.SPARK_INITIAL_OFFSET: self._initial,
            SC.SPARK_LATEST_OFFSET: self._latest, SC.SPARK_PLAN_PARTITIONS: self._partitions,
            SC.SPARK_COMMIT: self._commit, SC.SPARK_LIST_QUERIES: self._list,
            SC.SPARK_DETACH: self._detach,
        }  # fmt: skip

    # -- the runtime's side ------------------------------------------------------------------
    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Answer at once (list, detach, a bad request) or start a job (None: answered later)."""
        cmd = req.cmd
        handler = self.handlers.get(cmd.code)
        if handler is None:
            return cmd.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                     f" request type {cmd.code} not supported")  # fmt: skip
        try:
            body = loads(cmd)
            got = handler(req, body, now_ms)
            credentials = _credentials(body)
        except BadBody as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"bad request body: {exc}")
        except (SourceOptionError, PlanError) as exc:
            return cmd.make_response(SC.SPARK_BAD_OPTIONS, str(exc))
        except BridgeError as exc:
            return cmd.make_response(exc.code, exc.remark)
        if isinstance(got, RemotingCommand):
            return got
        self._start(got, req.conn_id, cmd, now_ms, SC.name_of(cmd.code), credentials)
        return None

    def on_response(self, addr: str, cmd: RemotingCommand, now_ms: int) -> None:
        """An answer from a name server or broker."""
        pending = self._pending.pop(cmd.opaque, None)
        if pending is None:
            log.debug("answer from %s with unknown opaque=%d", addr, cmd.opaque)
            return
        self._deliver(pending[0], pending[1], cmd, now_ms)

    def on_conn_lost(self, addr: str, reason: str, now_ms: int) -> None:
        """The connection to addr failed: every call waiting on it fails."""
        lost = [(o, p) for o, p in self._pending.items() if p[2] == addr]
        for opaque, (job_id, index, _addr) in lost:
            del self._pending[opaque]
            self._deliver(job_id, index, CallFailed(addr, reason), now_ms)

    def tick(self, now_ms: int) -> int:
        """Deadlines of calls, the KV registration, the registry's expiry; ms to the next."""
        for job_id, job in list(self._jobs.items()):
            if job.deadline_ms <= now_ms and job.waiting:
                stale = [(o, p) for o, p in self._pending.items() if p[0] == job_id]
                for opaque, (_j, index, addr) in stale:
                    del self._pending[opaque]
                    self._deliver(job_id, index, CallFailed(
                        addr, f"no answer within {self.call_timeout_ms} ms"), now_ms)
        if now_ms >= self._next_register_ms:
            self._next_register_ms = now_ms + REGISTER_PERIOD_MS
            self._start(self._register(), None, None, now_ms, "register", self.credentials)
        if now_ms >= self._next_expire_ms:
            self._next_expire_ms = now_ms + EXPIRE_PERIOD_MS
            self.registry.expire(now_ms)
        due = [self._next_register_ms, self._next_expire_ms]
        due += [j.deadline_ms for j in self._jobs.values() if j.waiting]
        return max(1, min(due) - now_ms)

    def take_calls(self) -> list[Call]:
        """The requests to send now (each to its address)."""
        calls, self.calls_out = self.calls_out, []
        return calls

    def unregister_calls(self) -> list[Call]:
        """DELETE_KV_CONFIG for each name server (sent on a clean stop), signed with the
        bridge's keys."""
        calls = [Call(ns, RemotingCommand.request(RequestCode.DELETE_KV_CONFIG,
                                                  DeleteKVConfigRequestHeader(KV_NAMESPACE,
                                                                              KV_KEY).to_ext()))
                 for ns in self.name_servers]  # fmt: skip
        if self.credentials is not None:
            for call in calls:
                self.credentials.sign(call.cmd)
        return calls

    # -- the job runner ----------------------------------------------------------------------
    def _start(self, gen: Job, conn_id: int | None, request: RemotingCommand | None,
               now_ms: int, label: str,
               credentials: SessionCredentials | None = None) -> None:  # fmt: skip
        job_id = next(self._ids)
        self._jobs[job_id] = _Running(gen, conn_id, request, [], 0, 0, label, credentials)
        self._advance(job_id, None, now_ms)

    def _deliver(self, job_id: int, index: int, result: Result, now_ms: int) -> None:
        job = self._jobs.get(job_id)
        if job is None or job.results[index] is not None:
            return
        job.results[index] = result
        job.waiting -= 1
        if job.waiting == 0:
            results = [r for r in job.results if r is not None]
            self._advance(job_id, results, now_ms)

    def _advance(self, job_id: int, value: list[Result] | None, now_ms: int) -> None:
        job = self._jobs[job_id]
        while True:
            try:
                calls = job.gen.send(value)  # type: ignore[arg-type]  # None starts it
            except StopIteration as stop:
                self._finish(job, stop.value)
                break
            except BridgeError as exc:
                self._finish(job, None, exc.code, exc.remark)
                break
            except (SourceOptionError, PlanError) as exc:
                self._finish(job, None, SC.SPARK_BAD_OPTIONS, str(exc))
                break
            except DataLossError as exc:
                self._finish(job, None, SC.SPARK_DATA_LOSS, str(exc))
                break
            except Exception as exc:
                log.exception("spark bridge job %s failed", job.label)
                self._finish(job, None, ResponseCode.SYSTEM_ERROR,
                             f"{type(exc).__name__}: {exc}"[:500])
                break
            if not calls:
                value = []
                continue
            job.results = [None] * len(calls)
            job.waiting = len(calls)
            job.deadline_ms = now_ms + self.call_timeout_ms
            for index, call in enumerate(calls):
                if job.credentials is not None:
                    job.credentials.sign(call.cmd)
                self._pending[call.cmd.opaque] = (job_id, index, call.addr)
                self.calls_out.append(call)
            return
        del self._jobs[job_id]

    def _finish(self, job: _Running, body: Any, code: int = ResponseCode.SUCCESS,
                remark: str | None = None) -> None:  # fmt: skip
        if job.request is None or job.conn_id is None:
            if code != ResponseCode.SUCCESS:
                log.warning("spark bridge %s: %s", job.label, remark)
            return
        if code != ResponseCode.SUCCESS:
            log.info("spark bridge %s refused: %s", job.label, remark)
            self.outbox.send(job.conn_id, job.request.make_response(code, remark))
            return
        self.outbox.send(job.conn_id, ok(job.request, body or {}))

    # -- requests ----------------------------------------------------------------------------
    def _query(self, body: dict[str, Any], opts: SourceOptions, now_ms: int) -> QueryInfo:
        query = body.get("query")
        if not isinstance(query, dict) or not query.get("id"):
            raise BadBody("no query object with an id")
        if opts.query_name and not query.get("name"):
            query = dict(query, name=opts.query_name)
        return self.registry.touch(query, opts.topics, opts.group_id, now_ms)

    def _opts(self, body: dict[str, Any], *, streaming: bool) -> SourceOptions:
        raw = body.get("options")
        if not isinstance(raw, dict):
            raise BadBody("no options object")
        return parse_source_options({str(k): str(v) for k, v in raw.items()},
                                    streaming=streaming)  # fmt: skip

    def _plan_batch(self, req: Request, body: dict[str, Any], now_ms: int) -> Job:
        opts = self._opts(body, streaming=False)
        return self._plan_batch_job(opts, self._query(body, opts, now_ms))

    def _plan_batch_job(self, opts: SourceOptions, info: QueryInfo) -> Job:
        brokers = yield from lookups.routes(opts.name_servers, opts.topics)
        heads = yield from lookups.heads(brokers, tolerate_down=False)
        start, by_start = yield from self._resolve(opts, heads, opts.starting,
                                                   opts.starting_timestamp, EARLIEST)
        end, _ = yield from self._resolve(opts, heads, opts.ending, opts.ending_timestamp,
                                          LATEST)  # fmt: skip
        named_end = planner.flatten(opts.ending) if isinstance(opts.ending, dict) else {}
        ranges = []
        for key, head in heads.items():
            s = start[key] if by_start else planner.check_start(
                key, start[key], head, opts.fail_on_data_loss, "startingOffsets")
            e = planner.check_end(key, end[key], head, opts.fail_on_data_loss)
            if key in named_end and 0 <= named_end[key] < s:
                raise PlanError(f"endingOffsets {named_end[key]} of {key} is before its "
                                f"start {s}")  # fmt: skip
            ranges.append(QueueRange(key, head.addr, s, max(s, e)))
        parts = planner.split_ranges(ranges, opts.min_partitions,
                                     opts.max_records_per_partition)  # fmt: skip
        self.registry.note_start(info, {r.key: r.start for r in ranges})
        self.registry.note_latest(info, {r.key: r.end for r in ranges})
        info.batches = len(parts)
        return {"partitions": [p.to_obj() for p in parts],
                "start": planner.nest({r.key: r.start for r in ranges}),
                "end": planner.nest({r.key: r.end for r in ranges})}  # fmt: skip

    def _resolve(self, opts: SourceOptions, heads: dict[QueueKey, planner.QueueHead],
                 spec: Any, ts: int | None, default: int
                 ) -> Generator[list[Call], list[Result], tuple[dict[QueueKey, int], bool]]:
        """Concrete offsets from a spec or a timestamp; True when found by time."""
        if isinstance(spec, dict):
            option = "startingOffsets" if default == EARLIEST else "endingOffsets"
            planner.check_names(spec, heads, option)
        by_time = None
        if ts is not None:
            by_time = yield from lookups.offsets_by_time(heads, ts, opts.pull_group)
        return planner.resolve(spec, heads, default=default, by_time=by_time), by_time is not None

    def _initial(self, req: Request, body: dict[str, Any], now_ms: int) -> Job:
        opts = self._opts(body, streaming=True)
        return self._initial_job(opts, self._query(body, opts, now_ms))

    def _initial_job(self, opts: SourceOptions, info: QueryInfo) -> Job:
        brokers = yield from lookups.routes(opts.name_servers, opts.topics)
        heads = yield from lookups.heads(brokers, tolerate_down=False)
        start, by_time = yield from self._resolve(opts, heads, opts.starting,
                                                  opts.starting_timestamp, LATEST)
        if not by_time:
            start = {k: planner.check_start(k, s, heads[k], opts.fail_on_data_loss,
                                            "startingOffsets") for k, s in start.items()}
        self.registry.note_start(info, start)
        self.registry.note_latest(info, {k: h.max_offset for k, h in heads.items()})
        return {"offset": planner.nest(start)}

    def _latest(self, req: Request, body: dict[str, Any], now_ms: int) -> Job:
        opts = self._opts(body, streaming=True)
        info = self._query(body, opts, now_ms)
        start = planner.flatten(_offsets(body, "start"))
        cap = planner.flatten(_offsets(body, "cap")) if body.get("cap") is not None else None
        max_rows = body.get("maxRows")
        if max_rows is not None and (not isinstance(max_rows, int) or max_rows < 1):
            raise BadBody(f"maxRows must be a positive integer, got {max_rows!r}")
        return self._latest_job(opts, info, start, cap, max_rows, bool(body.get("headsOnly")))

    def _latest_job(self, opts: SourceOptions, info: QueryInfo, start: dict[QueueKey, int],
                    cap: dict[QueueKey, int] | None, max_rows: int | None,
                    heads_only: bool) -> Job:  # fmt: skip
        brokers = yield from lookups.routes(opts.name_servers, opts.topics)
        heads = yield from lookups.heads(brokers, tolerate_down=True)
        maxes = {k: h.max_offset for k, h in heads.items()}
        latest = planner.nest(maxes)
        self.registry.note_latest(info, maxes)
        if heads_only:  # Trigger.AvailableNow's target, or an old PySpark's unknown start
            return {"offset": latest, "latest": latest}
        begin = dict(start)
        end = dict(start)  # queues not seen this round keep their offsets
        for key, head in heads.items():
            if key not in begin:  # a new queue or broker: from its earliest, as Kafka does
                begin[key] = planner.check_start(key, 0, head, opts.fail_on_data_loss,
                                                 "the start of a new queue")  # fmt: skip
                log.info("query %s picks up new queue %s from offset %d", info.name, key,
                         begin[key])  # fmt: skip
            s = begin[key]
            if head.max_offset < s:
                msg = (f"{key} now ends at {head.max_offset}, before the query's offset {s} "
                       "(the queue was deleted or truncated)")  # fmt: skip
                if opts.fail_on_data_loss:
                    raise DataLossError(msg + " (failOnDataLoss=true)")
                log.warning("%s; continuing from %d (failOnDataLoss=false)", msg,
                            head.max_offset)  # fmt: skip
            target = head.max_offset
            if cap is not None:
                target = max(s, min(target, cap.get(key, s)))
            end[key] = target
        if max_rows is not None:
            end = planner.rate_limit(begin, end, max_rows)
        # Spark asks for the next end only once the micro-batch ending at `start` is done and
        # in its commit log (its commit(start) comes one micro-batch later, and never for the
        # last micro-batch of Trigger.AvailableNow or Once): report it now
        self.registry.note_progress(info, start)
        if opts.group_id and info.unacked:
            addrs = {k: h.addr for k, h in heads.items()}
            yield from self._commit_group(opts.group_id, info, addrs, "latestOffset's start")
        return {"offset": planner.nest(end), "latest": latest}

    def _partitions(self, req: Request, body: dict[str, Any], now_ms: int) -> Job:
        opts = self._opts(body, streaming=True)
        self._query(body, opts, now_ms)
        start = planner.flatten(_offsets(body, "start"))
        end = planner.flatten(_offsets(body, "end"))
        return self._partitions_job(opts, start, end)

    def _partitions_job(self, opts: SourceOptions, start: dict[QueueKey, int],
                        end: dict[QueueKey, int]) -> Job:  # fmt: skip
        todo = {k: e for k, e in end.items() if e > start.get(k, -1)}
        if not todo:
            return {"partitions": []}
        topics = tuple(sorted({k.topic for k in todo}))
        brokers = yield from lookups.routes(opts.name_servers, topics)
        heads = yield from lookups.heads(brokers, tolerate_down=True, with_max=False)
        ranges = []
        for key, e in sorted(todo.items()):
            head = heads.get(key)
            if head is None:
                raise BridgeError(SC.SPARK_UNREACHABLE,
                                  f"{key} has no reachable master now; cannot plan its range "
                                  f"up to {e} (restart the query once the broker is back)")
            s = start.get(key, 0)
            if s < head.min_offset:
                s = planner.check_start(key, s, head, opts.fail_on_data_loss, "offset")
            ranges.append(QueueRange(key, head.addr, s, e))
        parts = planner.split_ranges(ranges, opts.min_partitions,
                                     opts.max_records_per_partition)  # fmt: skip
        return {"partitions": [p.to_obj() for p in parts]}

    def _commit(self, req: Request, body: dict[str, Any], now_ms: int) -> Job:
        opts = self._opts(body, streaming=True)
        info = self._query(body, opts, now_ms)
        end = planner.flatten(_offsets(body, "end"))
        self.registry.note_commit(info, end)
        return self._commit_job(opts, info)

    def _commit_job(self, opts: SourceOptions, info: QueryInfo) -> Job:
        if not opts.group_id or not info.unacked:
            return {}
        brokers = yield from lookups.routes(opts.name_servers,
                                            tuple(sorted({k.topic for k in info.unacked})))
        addrs = {QueueKey(br.topic, br.broker, q): br.master
                 for routes_of in brokers.values() for br in routes_of if br.master
                 for q in range(br.read_queues)}  # fmt: skip
        failed = yield from self._commit_group(opts.group_id, info, addrs, "commit(end)")
        return {"failed": failed}

    def _commit_group(self, group: str, info: QueryInfo, addrs: dict[QueueKey, str], why: str
                      ) -> Generator[list[Call], list[Result], list[str]]:  # fmt: skip
        """The query's group offsets no broker has recorded yet (this progress, and any that
        failed before); the failures, as text."""
        sent = dict(info.unacked)
        failed = yield from lookups.commit_offsets(group, sent, addrs, why)
        self.registry.note_recorded(info, sent, failed)
        if failed:
            log.warning("group %s: offsets not committed for %s (sent again with the next "
                        "commit)", group, "; ".join(f"{k}: {w}" for k, w in failed.items()))
        return [f"{k}: {w}" for k, w in failed.items()]

    def _list(self, req: Request, body: dict[str, Any], now_ms: int) -> RemotingCommand:
        return ok(req.cmd, {"queries": self.registry.rows(now_ms),
                            "nameServers": list(self.name_servers)})

    def _detach(self, req: Request, body: dict[str, Any], now_ms: int) -> RemotingCommand:
        query = body.get("query")
        if isinstance(query, dict) and query.get("id"):
            self.registry.detach(str(query["id"]), now_ms)
        return ok(req.cmd, {})

    def _register(self) -> Job:
        calls = [Call(ns, RemotingCommand.request(
            RequestCode.PUT_KV_CONFIG,
            PutKVConfigRequestHeader(KV_NAMESPACE, KV_KEY, self.advertise).to_ext()))
            for ns in self.name_servers]  # fmt: skip
        results = yield calls
        for call, r in zip(calls, results, strict=True):
            if isinstance(r, CallFailed) or r.code != ResponseCode.SUCCESS:
                why = r.reason if isinstance(r, CallFailed) else f"code {r.code} {r.remark}"
                log.warning("registering the bridge with name server %s failed: %s",
                            call.addr, why)  # fmt: skip
        return None


def _credentials(body: dict[str, Any]) -> SessionCredentials | None:
    """The ACL keys among a request's options (the handler has parsed them already)."""
    raw = body.get("options")
    if not isinstance(raw, dict):
        return None
    return credentials_of({str(k): str(v) for k, v in raw.items()})


def _offsets(body: dict[str, Any], name: str) -> dict[str, dict[str, dict[str, int]]]:
    """An offsets member of a request: topic -> broker -> queueId -> int."""
    value = body.get(name)
    if not isinstance(value, dict):
        raise BadBody(f"{name} must be an offsets object")
    try:
        return {str(t): {str(b): {str(q): int(o) for q, o in qs.items()}
                         for b, qs in bs.items()} for t, bs in value.items()}  # fmt: skip
    except (AttributeError, TypeError, ValueError):
        raise BadBody(f"{name} is not topic -> broker -> queueId -> offset") from None
