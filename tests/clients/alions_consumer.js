'use strict';
// An ali-ons push consumer in a consumer group mixed with Python and Java members, for
// tests/integration/test_client_mixed_group.py.
//   node alions_consumer.js NAMESRV TOPIC GROUP STRATEGY PARAM INSTANCE
// ali-ons ships only AllocateMessageQueueAveragely; its allocateMessageQueueStrategy option takes
// any object with allocate(group, cid, mqAll, cidAll), so the other Java strategies are written
// here (ByCircle, ConsistentHash with Java's MD5 ring, ByMachineRoom, ByConfig) to show a
// Node member can split queues as Java and Python do.
// Prints JSON lines: {"event":"ready","cid":...}, {"event":"assigned","queues":[...]} on changes.
// Stops when stdin closes.

const crypto = require('crypto');
const { Consumer } = require('ali-ons');
const AllocateMessageQueueAveragely = require('ali-ons/lib/consumer/rebalance/allocate_message_queue_averagely');
const MQClient = require('ali-ons/lib/mq_client');

const [ nameSrv, topic, group, strategyName, param, instanceName ] = process.argv.slice(2);
const httpclient = { request() { throw new Error('httpclient must not be used with nameSrv'); } };
const quiet = { info() {}, warn() {}, debug() {}, error(...a) { console.error(...a); } };
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');

function check(cid, mqAll, cidAll) {
  if (!cid) throw new Error('currentCID is empty');
  if (!mqAll || !mqAll.length) throw new Error('mqAll is null or mqAll empty');
  if (!cidAll || !cidAll.length) throw new Error('cidAll is null or cidAll empty');
  return cidAll.indexOf(cid) >= 0;
}
const byCircle = { name: 'AVG_BY_CIRCLE', allocate(g, cid, mqAll, cidAll) {
  if (!check(cid, mqAll, cidAll)) return [];
  const i = cidAll.indexOf(cid);
  return mqAll.filter((q, j) => j % cidAll.length === i);
} };
function md5(key) {
  return crypto.createHash('md5').update(Buffer.from(key, 'utf8')).digest().readUInt32BE(0);
}
const consistentHash = { name: 'CONSISTENT_HASH', allocate(g, cid, mqAll, cidAll) {
  if (!check(cid, mqAll, cidAll)) return [];
  const vnodes = Number(param || 10);
  const ring = new Map();
  for (const c of cidAll) for (let i = 0; i < vnodes; i++) ring.set(md5(`${c}-${i}`), c);
  const keys = [ ...ring.keys() ].sort((a, b) => a - b);
  return mqAll.filter(mq => {
    const h = md5(`MessageQueue [topic=${mq.topic}, brokerName=${mq.brokerName}, queueId=${mq.queueId}]`);
    const k = keys.find(x => x >= h);
    return ring.get(k === undefined ? keys[0] : k) === cid;
  });
} };
const machineRoom = { name: 'MACHINE_ROOM', allocate(g, cid, mqAll, cidAll) {
  if (!check(cid, mqAll, cidAll)) return [];
  const idcs = new Set(param.split(','));
  const i = cidAll.indexOf(cid);
  const pre = mqAll.filter(mq => {
    const parts = mq.brokerName.split('@');
    return parts.length === 2 && idcs.has(parts[0]);
  });
  const mod = Math.floor(pre.length / cidAll.length);
  const rem = pre.length % cidAll.length;
  const res = pre.slice(mod * i, mod * i + mod);
  if (rem > i) res.push(pre[i + mod * cidAll.length]);
  return res;
} };
const byConfig = { name: 'CONFIG', allocate(g, cid, mqAll) {
  const want = new Set(param.split(','));
  return mqAll.filter(mq => want.has(`${mq.brokerName}:${mq.queueId}`));
} };
const strategies = { AVG: new AllocateMessageQueueAveragely(), AVG_BY_CIRCLE: byCircle,
  CONSISTENT_HASH: consistentHash, MACHINE_ROOM: machineRoom, CONFIG: byConfig };

// as alions_roundtrip.js: retry GET_CONSUMER_LIST_BY_GROUP while the broker does not know us yet
const originalGetConsumerIdList = MQClient.prototype.getConsumerIdListByGroup;
MQClient.prototype.getConsumerIdListByGroup = async function(addr, g, timeout) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await originalGetConsumerIdList.call(this, addr, g, timeout);
    } catch (err) {
      if (attempt >= 50 || !/no consumer for this group/.test(String(err && err.message))) throw err;
      await new Promise(resolve => setTimeout(resolve, 100));
    }
  }
};

(async () => {
  const consumer = new Consumer({
    nameSrv, httpclient, logger: quiet, consumerGroup: group, instanceName,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', persistent: true, rebalanceInterval: 1000,
    allocateMessageQueueStrategy: strategies[strategyName],
  });
  consumer.subscribe(topic, '*', async () => {});
  consumer.on('error', err => console.error('[consumer error]', err && err.message));
  await consumer.ready();
  out({ event: 'ready', cid: consumer._mqClient.clientId });
  let last = null;
  const timer = setInterval(() => {
    const now = [];
    for (const v of consumer._processQueueTable.values()) {
      if (v.messageQueue.topic === topic) now.push(`${v.messageQueue.brokerName}:${v.messageQueue.queueId}`);
    }
    now.sort();
    const line = JSON.stringify({ event: 'assigned', queues: now });
    if (line !== last) { process.stdout.write(line + '\n'); last = line; }
  }, 100);
  process.stdin.on('end', async () => {
    clearInterval(timer);
    await consumer.close();
    out({ event: 'closed' });
    process.exit(0);
  });
  process.stdin.resume();
})().catch(err => {
  out({ event: 'error', error: String(err && err.stack || err) });
  process.exit(1);
});
