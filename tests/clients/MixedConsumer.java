// A Java push consumer (the reference RocketMQ 4.9.8 client jars) in a consumer group mixed with
// Python and ali-ons members, for tests/integration/test_client_mixed_group.py.
//   java -Drocketmq.client.rebalance.waitInterval=1000 MixedConsumer NAMESRV TOPIC GROUP STRATEGY PARAM
// STRATEGY: AVG | AVG_BY_CIRCLE | CONSISTENT_HASH (PARAM virtual nodes) | MACHINE_ROOM (PARAM
// idc,idc) | CONFIG (PARAM broker:qid,broker:qid) | NEARBY (PARAM inner strategy; rooms are the
// text before the first '@' of a broker name or client id).
// Prints JSON lines: {"event":"ready","cid":...}, then {"event":"assigned","queues":[...]}
// whenever its queues of TOPIC change. Stops (shutdown) when stdin closes.
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMachineRoomNearby;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueByConfig;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueByMachineRoom;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueConsistentHash;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageQueue;

public class MixedConsumer {
    static String room(String s) {
        int i = s.indexOf('@');
        return i < 0 ? s : s.substring(0, i);
    }

    static AllocateMessageQueueStrategy strategy(String topic, String name, String param) {
        switch (name) {
            case "AVG": return new AllocateMessageQueueAveragely();
            case "AVG_BY_CIRCLE": return new AllocateMessageQueueAveragelyByCircle();
            case "CONSISTENT_HASH": return new AllocateMessageQueueConsistentHash(Integer.parseInt(param));
            case "MACHINE_ROOM": {
                AllocateMessageQueueByMachineRoom s = new AllocateMessageQueueByMachineRoom();
                s.setConsumeridcs(new HashSet<>(Arrays.asList(param.split(","))));
                return s;
            }
            case "CONFIG": {
                List<MessageQueue> mqs = new ArrayList<>();
                for (String q : param.split(",")) {
                    String[] p = q.split(":");
                    mqs.add(new MessageQueue(topic, p[0], Integer.parseInt(p[1])));
                }
                AllocateMessageQueueByConfig s = new AllocateMessageQueueByConfig();
                s.setMessageQueueList(mqs);
                return s;
            }
            case "NEARBY":
                return new AllocateMachineRoomNearby(strategy(topic, param, "10"),
                    new AllocateMachineRoomNearby.MachineRoomResolver() {
                        public String brokerDeployIn(MessageQueue mq) { return room(mq.getBrokerName()); }
                        public String consumerDeployIn(String cid) { return room(cid); }
                    });
            default: throw new IllegalArgumentException(name);
        }
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], group = args[2];
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setAllocateMessageQueueStrategy(strategy(topic, args[3], args.length > 4 ? args[4] : ""));
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) ->
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        c.start();
        String cid = c.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId();
        System.out.println("{\"event\":\"ready\",\"cid\":\"" + cid + "\"}");
        System.out.flush();
        InputStream in = System.in;
        Thread watcher = new Thread(() -> {
            try {
                while (in.read() >= 0) { }
            } catch (Exception ignored) { }
        });
        watcher.setDaemon(true);
        watcher.start();
        String last = null;
        while (watcher.isAlive()) {
            Set<String> now = new TreeSet<>();
            for (MessageQueue mq : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()) {
                if (mq.getTopic().equals(topic)) now.add("\"" + mq.getBrokerName() + ":" + mq.getQueueId() + "\"");
            }
            String line = "{\"event\":\"assigned\",\"queues\":[" + String.join(",", now) + "]}";
            if (!line.equals(last)) {
                System.out.println(line);
                System.out.flush();
                last = line;
            }
            Thread.sleep(100);
        }
        c.shutdown();
        System.out.println("{\"event\":\"closed\"}");
        System.out.flush();
        System.exit(0);
    }
}
