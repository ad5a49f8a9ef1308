"""Request and response code -> header class, and the request header decoder by code.

Mirrors the choice RocketMQ 4.9.x's processors make with
RemotingCommand.decodeCommandCustomHeader(Class) per request code: one table here, for the
codes whose header has a class (the fuzzers and decode_request_header use it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from protocol.codes import RequestCode
from protocol.headers.admin import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from protocol.headers.command_custom_header import (
    CommandCustomHeader,
)
from protocol.headers.consumer import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerListByGroupResponseHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    NotifyConsumerIdsChangedRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UnregisterClientRequestHeader,
    UnregisterClientResponseHeader,
    UpdateConsumerOffsetRequestHeader,
    UpdateConsumerOffsetResponseHeader,
    ViewMessageRequestHeader,
)
from protocol.headers.namesrv import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from protocol.headers.producer import (
    V2_SEND_CODES,
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)

# Request code -> its request header class. Codes without a header (HEART_BEAT, LOCK_BATCH_MQ,
# UNLOCK_BATCH_MQ, GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_CONFIG, ...) are absent. The send
# codes share one class: use decode_send_header (or decode_request_header) for the V2 keys.
REQUEST_HEADERS: Final[dict[int, type[CommandCustomHeader]]] = {
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeader,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_REPLY_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_REPLY_MESSAGE_V2: SendMessageRequestHeader,
    RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: ReplyMessageRequestHeader,
    RequestCode.QUERY_CORRECTION_OFFSET: QueryCorrectionOffsetHeader,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RequestCode.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
    RequestCode.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: GetConsumerStatusRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GetConsumerStatusRequestHeader,
    RequestCode.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader,
    RequestCode.QUERY_CONSUME_TIME_SPAN: QueryConsumeTimeSpanRequestHeader,
    RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
    RequestCode.QUERY_CONSUME_QUEUE: QueryConsumeQueueRequestHeader,
    RequestCode.CLONE_GROUP_OFFSET: CloneGroupOffsetRequestHeader,
    RequestCode.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    RequestCode.RESUME_CHECK_HALF_MESSAGE: ResumeCheckHalfMessageRequestHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerRequestHeader,
}


# Request code -> the header class of its response (where the response has one).
RESPONSE_HEADERS: Final[dict[int, type[CommandCustomHeader]]] = {
    RequestCode.SEND_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageResponseHeader,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_REPLY_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_REPLY_MESSAGE_V2: SendMessageResponseHeader,
    RequestCode.PULL_MESSAGE: PullMessageResponseHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageResponseHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetResponseHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetResponseHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetResponseHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetResponseHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetResponseHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeResponseHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientResponseHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupResponseHeader,
    RequestCode.GET_BROKER_CONFIG: GetBrokerConfigResponseHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigResponseHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerResponseHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerResponseHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerResponseHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionResponseHeader,
}


def decode_request_header(code: int, ext: Mapping[str, str] | None) -> CommandCustomHeader | None:
    """The typed request header for `code` (None when the code has no header class)."""
    if code in V2_SEND_CODES:
        return SendMessageRequestHeader.from_ext_v2(ext)
    cls = REQUEST_HEADERS.get(code)
    return cls.from_ext(ext) if cls is not None else None
