'use strict';
// Drives the unmodified ali-ons RocketMQ client against an actormq cluster:
//   1. GET_BROKER_CLUSTER_INFO at the name server, UPDATE_AND_CREATE_TOPIC at every master;
//   2. a Producer sends N messages with tags and keys;
//   3. a push Consumer (CONSUME_FROM_FIRST_OFFSET) consumes them.
// Every step prints one JSON line on stdout; the Python test compares them.
// Usage: node alions_roundtrip.js <namesrv host:port> <topic> <count> <timeout ms>

const { Producer, Consumer, Message } = require('ali-ons');
const MQClientAPI = require('ali-ons/lib/mq_client_api');
const RemotingCommand = require('ali-ons/lib/protocol/command/remoting_command');
const JSON2 = require('JSON2');

const [ nameSrv, topic, countArg, timeoutArg ] = process.argv.slice(2);
const count = Number(countArg || 100);
const timeoutMs = Number(timeoutArg || 60000);
// ali-ons asks for an HTTP client only to fetch name-server lists from an address service;
// with `nameSrv` given it is never called.
const httpclient = { request() { throw new Error('httpclient must not be used with nameSrv'); } };
const quiet = { info() {}, warn() {}, debug() {}, error(...a) { console.error(...a); } };
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');

async function createTopic() {
  const api = new MQClientAPI({ nameSrv, httpclient, logger: quiet });
  await api.ready();
  const req = RemotingCommand.createRequestCommand(106, {});
  const res = await api.invoke(null, req, 5000);
  if (res.code !== 0) throw new Error('GET_BROKER_CLUSTER_INFO failed: ' + res.code + ' ' + res.remark);
  const info = JSON2.parse(res.body.toString());
  const masters = [];
  for (const name of Object.keys(info.brokerAddrTable)) {
    const addrs = info.brokerAddrTable[name].brokerAddrs;
    if (addrs['0']) masters.push(addrs['0']);
  }
  for (const addr of masters) {
    await api.createTopic(addr, 'TBW102', {
      topicName: topic, readQueueNums: 4, writeQueueNums: 4, perm: 6,
      topicFilterType: 'SINGLE_TAG', topicSysFlag: 0, order: false,
    }, 5000);
  }
  out({ event: 'topic_created', masters });
  // A Java broker answers UPDATE_AND_CREATE_TOPIC only after it re-registered with the name
  // servers, so the route is there at once. Count the probes (bounded: 10 s) so the test can
  // check that, and still go on to produce and consume when the route comes late.
  const started = Date.now();
  let probes = 0;
  let routed = false;
  while (!routed && Date.now() - started < 10000) {
    probes += 1;
    try {
      await api.getTopicRouteInfoFromNameServer(topic, 3000);
      routed = true;
    } catch (err) {
      await new Promise(resolve => setTimeout(resolve, 100));
    }
  }
  out({ event: 'route_ready', routed, probes, waitedMs: Date.now() - started });
  await api.close();
}

async function produce() {
  const producer = new Producer({ nameSrv, httpclient, logger: quiet, producerGroup: 'PG_' + topic });
  await producer.ready();
  for (let i = 0; i < count; i++) {
    const msg = new Message(topic, 'Tag' + (i % 3), 'body-' + i);
    msg.keys = [ 'key-' + i ];
    const r = await producer.send(msg);
    out({ event: 'sent', i, status: r.sendStatus, msgId: r.msgId, queueId: r.messageQueue.queueId,
      queueOffset: r.queueOffset });
  }
  await producer.close();
}

// A Java broker knows a consumer from its first HEART_BEAT on, so the rebalance ali-ons runs
// right after it finds the group. When GET_CONSUMER_LIST_BY_GROUP says "no consumer for this
// group", ali-ons fails consumer.ready() for good (the Java client would log and rebalance
// 20 s later). Retry that call (bounded: 50 x 100 ms) and count the retries, so the test can
// check the requirement and still exercise the rest of the round trip.
const MQClient = require('ali-ons/lib/mq_client');
let consumerListRetries = 0;
const originalGetConsumerIdList = MQClient.prototype.getConsumerIdListByGroup;
MQClient.prototype.getConsumerIdListByGroup = async function(addr, group, timeout) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await originalGetConsumerIdList.call(this, addr, group, timeout);
    } catch (err) {
      if (attempt >= 50 || !/no consumer for this group/.test(String(err && err.message))) throw err;
      consumerListRetries += 1;
      await new Promise(resolve => setTimeout(resolve, 100));
    }
  }
};

async function consume() {
  const consumer = new Consumer({
    nameSrv, httpclient, logger: quiet, consumerGroup: 'CG_' + topic,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', persistent: true,
  });
  let seen = 0;
  const done = new Promise(resolve => {
    consumer.subscribe(topic, '*', async msg => {
      out({ event: 'received', body: msg.body.toString(), tags: msg.tags, keys: msg.keys,
        queueId: msg.queueId, queueOffset: Number(msg.queueOffset), msgId: msg.msgId,
        topic: msg.topic, reconsumeTimes: msg.reconsumeTimes });
      seen += 1;
      if (seen >= count) resolve();
    });
  });
  consumer.on('error', err => console.error('[consumer error]', err && err.message));
  await consumer.ready();
  out({ event: 'consumer_ready', consumerListRetries });
  const timer = new Promise((_, reject) => setTimeout(() => reject(new Error('consume timeout')), timeoutMs));
  await Promise.race([ done, timer ]);
  await consumer.close();
}

(async () => {
  await createTopic();
  await produce();
  await consume();
  out({ event: 'done' });
  process.exit(0);
})().catch(err => {
  out({ event: 'error', error: String(err && err.stack || err) });
  process.exit(1);
});
