// Runs the real RocketMQ 4.9.8 allocation strategies over cases read from stdin (golden answers
// for tests/unit/client/test_allocate_golden.py). One case per line, tab-separated:
//   STRATEGY  PARAM  mq;mq;...  cid;cid;...        mq = topic,brokerName,queueId
// STRATEGY: AVG | AVG_BY_CIRCLE | CONSISTENT_HASH (PARAM = virtual nodes) | MACHINE_ROOM
// (PARAM = idc,idc) | NEARBY (PARAM = inner strategy; rooms are the text before the first '@').
// Output, one line per case: for each cid in input order, the indices into the mq list of its
// share, comma-separated (E when the strategy throws IllegalArgumentException); shares
// separated by '|'.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMachineRoomNearby;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueByMachineRoom;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueConsistentHash;
import org.apache.rocketmq.common.message.MessageQueue;

public class AllocateGolden {
    static String room(String s) {
        int i = s.indexOf('@');
        return i < 0 ? s : s.substring(0, i);
    }

    static AllocateMessageQueueStrategy simple(String name, String param) {
        switch (name) {
            case "AVG": return new AllocateMessageQueueAveragely();
            case "AVG_BY_CIRCLE": return new AllocateMessageQueueAveragelyByCircle();
            case "CONSISTENT_HASH": return new AllocateMessageQueueConsistentHash(Integer.parseInt(param));
            default: throw new IllegalArgumentException(name);
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] f = line.split("\t", -1);
            List<MessageQueue> mqs = new ArrayList<>();
            for (String q : f[2].split(";")) {
                String[] p = q.split(",", -1);
                mqs.add(new MessageQueue(p[0], p[1], Integer.parseInt(p[2])));
            }
            List<String> cids = new ArrayList<>(Arrays.asList(f[3].split(";")));
            AllocateMessageQueueStrategy s;
            if (f[0].equals("MACHINE_ROOM")) {
                AllocateMessageQueueByMachineRoom m = new AllocateMessageQueueByMachineRoom();
                m.setConsumeridcs(new HashSet<>(Arrays.asList(f[1].split(","))));
                s = m;
            } else if (f[0].equals("NEARBY")) {
                String[] inner = f[1].split(":", -1);
                s = new AllocateMachineRoomNearby(simple(inner[0], inner.length > 1 ? inner[1] : ""),
                    new AllocateMachineRoomNearby.MachineRoomResolver() {
                        public String brokerDeployIn(MessageQueue mq) { return room(mq.getBrokerName()); }
                        public String consumerDeployIn(String cid) { return room(cid); }
                    });
            } else {
                s = simple(f[0], f[1]);
            }
            Map<MessageQueue, Integer> index = new IdentityHashMap<>();
            for (int i = 0; i < mqs.size(); i++) index.put(mqs.get(i), i);
            for (int c = 0; c < cids.size(); c++) {
                if (c > 0) out.append('|');
                List<MessageQueue> got;
                try {
                    got = s.allocate("golden", cids.get(c), mqs, cids);
                } catch (IllegalArgumentException e) {
                    out.append('E');  // the strategy refuses the input
                    continue;
                }
                for (int i = 0; i < got.size(); i++) {
                    if (i > 0) out.append(',');
                    out.append(index.get(got.get(i)));
                }
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
