// A Java push consumer (the reference RocketMQ 4.9.8 client jars) that prints what it consumes,
// for tests/integration/test_role_kill_resume.py.
//   java -Drocketmq.client.rebalance.waitInterval=1000 PrintingConsumer NAMESRV TOPIC GROUP
// Prints JSON lines: {"event":"ready"}, then {"event":"got","body":...,"queue":n,"offset":n}
// per message consumed (bodies are ASCII without quotes). Stops (shutdown) when stdin closes.
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

public class PrintingConsumer {
    static synchronized void print(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(args[2]);
        c.setNamesrvAddr(args[0]);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(args[1], "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                print("{\"event\":\"got\",\"body\":\"" + new String(m.getBody()) + "\",\"queue\":"
                    + m.getQueueId() + ",\"offset\":" + m.getQueueOffset() + "}");
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        print("{\"event\":\"ready\"}");
        while (System.in.read() >= 0) { }
        c.shutdown();
        print("{\"event\":\"closed\"}");
        System.exit(0);
    }
}
