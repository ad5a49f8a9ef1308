import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * The real RocketMQ 4.9.8 producer with message trace on (enableMsgTrace): args namesrv topic
 * group key. Sends one message with that key, prints "SENT <msgId> <offsetMsgId>", waits for
 * the trace dispatcher to send its record, then shuts down (which flushes the trace).
 */
public class TraceProducer {
    public static void main(String[] args) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(args[2], true);
        p.setNamesrvAddr(args[0]);
        p.setInstanceName("trace" + System.nanoTime());
        p.start();
        Message msg = new Message(args[1], "TagT", args[3], ("traced by java").getBytes());
        SendResult r = p.send(msg);
        System.out.println("SENT " + r.getMsgId() + " " + r.getOffsetMsgId() + " "
            + r.getSendStatus());
        Thread.sleep(1500);
        p.shutdown();
        System.exit(0);
    }
}
