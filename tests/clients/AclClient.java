import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * The real RocketMQ 4.9.8 producer, signing with AclClientRPCHook (or not, with "-" keys):
 * args namesrv topic accessKey secretKey count. Prints one line per send: "OK <status>" or
 * "ERR <response code> <message>".
 */
public class AclClient {
    public static void main(String[] args) throws Exception {
        RPCHook hook = "-".equals(args[2]) ? null
            : new AclClientRPCHook(new SessionCredentials(args[2], args[3]));
        DefaultMQProducer p = new DefaultMQProducer("acl_test_pg", hook);
        p.setNamesrvAddr(args[0]);
        p.setInstanceName("acl" + System.nanoTime());
        p.setRetryTimesWhenSendFailed(0);
        p.setSendMsgTimeout(5000);
        p.start();
        int n = Integer.parseInt(args[4]);
        for (int i = 0; i < n; i++) {
            try {
                SendResult r = p.send(new Message(args[1], "TagA", ("acl " + i).getBytes()));
                System.out.println("OK " + r.getSendStatus());
            } catch (MQBrokerException e) {
                System.out.println("ERR " + e.getResponseCode() + " " + e.getErrorMessage());
            } catch (MQClientException e) {  // a retried code's last answer is its cause
                Throwable c = e.getCause();
                if (c instanceof MQBrokerException) {
                    MQBrokerException b = (MQBrokerException) c;
                    System.out.println("ERR " + b.getResponseCode() + " " + b.getErrorMessage());
                } else {
                    System.out.println("ERR " + e.getResponseCode() + " " + e.getErrorMessage());
                }
            }
        }
        p.shutdown();
        System.exit(0);
    }
}
