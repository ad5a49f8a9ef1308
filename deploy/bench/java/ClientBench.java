// The Java 4.9.8 client's side of `actormq bench --consumer --java` and `--client --java`
// (deploy/bench/java_client.py): the same workloads the Python PushConsumer and Producer run in
// deploy/bench/consumer_bench.py and client_bench.py, with the
// reference RocketMQ 4.9.8 client jars, each after an untimed warm-up in the same JVM.
//   java ClientBench consume NAMESRV TOPIC TOTAL WARMUP_S
//     a DefaultMQPushConsumer (Java's defaults: 20 consume threads, pullBatchSize 32,
//     consumeMessageBatchMaxSize 1) with a no-op listener over TOPIC's TOTAL stored messages
//     from the first offset, a fresh group each pass; passes repeat untimed until WARMUP_S
//     seconds have gone, then one timed pass. Prints {"rate": msgs/s from the first message to
//     the last, "cpu_us": process CPU us per message, "warm_passes": n}.
//   java ClientBench latency NAMESRV TOPIC N
//     a DefaultMQPushConsumer whose listener takes now - the big-endian epoch-ns stamp in the
//     first 8 bytes of each body (bodies of 9 bytes or fewer are the sender's warm-up and not
//     counted); prints {"event": "ready"} once it holds TOPIC's queues, then
//     {"p50_ms": .., "p99_ms": .., "count": N} after N stamped messages.
//   java ClientBench produce NAMESRV TOPIC TOTAL INFLIGHT WARMUP_S
//     a DefaultMQProducer (Java's defaults) sending 1 KiB messages with send(msg, callback),
//     at most INFLIGHT unanswered (a semaphore, as our Producer's max_inflight), untimed until
//     WARMUP_S seconds have gone, then TOTAL timed. Prints {"rate": msgs/s from the first send
//     to the last callback, "cpu_us": process CPU us per message, "warm_msgs": n}.
// Exits once its result is printed (or after 300 s, with an error line).
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

public class ClientBench {
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    static long epochNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    /** One pass over the backlog with a fresh group: {msgs/s, cpu ns}. */
    static double[] consumePass(String ns, String topic, int total, int pass) throws Exception {
        AtomicInteger count = new AtomicInteger();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("bench_java_c_" + System.nanoTime() + "_" + pass);
        c.setNamesrvAddr(ns);
        c.setInstanceName("bench" + pass + "_" + System.nanoTime());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            int n = count.addAndGet(msgs.size());
            if (n >= total) {
                last.compareAndSet(0, now);
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long cpu0 = cpuNanos();
        c.start();
        boolean ok = done.await(300, TimeUnit.SECONDS);
        long cpu = cpuNanos() - cpu0;
        c.shutdown();
        if (!ok) {
            throw new IllegalStateException("only " + count.get() + " of " + total + " consumed");
        }
        return new double[] {total / ((last.get() - first.get()) / 1e9), cpu};
    }

    static void consume(String ns, String topic, int total, double warmupS) throws Exception {
        long warmEnd = System.nanoTime() + (long) (warmupS * 1e9);
        int passes = 0;
        while (System.nanoTime() < warmEnd || passes == 0) {
            consumePass(ns, topic, total, passes);
            passes++;
        }
        double[] r = consumePass(ns, topic, total, passes);
        System.out.printf("{\"rate\": %.1f, \"cpu_us\": %.3f, \"warm_passes\": %d}%n",
            r[0], r[1] / 1e3 / total, passes);
    }

    static void latency(String ns, String topic, int n) throws Exception {
        long[] lat = new long[n];
        AtomicInteger count = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("bench_java_d_" + System.nanoTime());
        c.setNamesrvAddr(ns);
        c.setInstanceName("benchd_" + System.nanoTime());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = epochNanos();
            for (MessageExt m : msgs) {
                byte[] b = m.getBody();
                if (b.length <= 9) {
                    continue;
                }
                int i = count.getAndIncrement();
                if (i < n) {
                    lat[i] = now - ByteBuffer.wrap(b, 0, 8).getLong();
                    if (i == n - 1) {
                        done.countDown();
                    }
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().size() < 4
               && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        Thread.sleep(500);  // the first long polls are parked at the broker
        System.out.println("{\"event\": \"ready\"}");
        System.out.flush();
        boolean ok = done.await(300, TimeUnit.SECONDS);
        c.shutdown();
        if (!ok) {
            throw new IllegalStateException("only " + count.get() + " of " + n + " received");
        }
        Arrays.sort(lat);
        System.out.printf("{\"p50_ms\": %.4f, \"p99_ms\": %.4f, \"count\": %d}%n",
            lat[n / 2] / 1e6, lat[Math.min(n - 1, (int) (n * 0.99))] / 1e6, n);
    }

    /** The first failed async send's exception or status (said when a run fails). */
    static final java.util.concurrent.atomic.AtomicReference<String> FIRST_FAILURE =
        new java.util.concurrent.atomic.AtomicReference<>();

    /** n async sends, at most `inflight` unanswered; returns the failures. */
    static int sendAsync(DefaultMQProducer p, String topic, byte[] body, int n, int inflight)
            throws Exception {
        Semaphore room = new Semaphore(inflight);
        CountDownLatch done = new CountDownLatch(n);
        AtomicInteger failed = new AtomicInteger();
        for (int i = 0; i < n; i++) {
            room.acquire();
            p.send(new Message(topic, body), new SendCallback() {
                public void onSuccess(SendResult r) {
                    if (r.getSendStatus() != SendStatus.SEND_OK) {
                        failed.incrementAndGet();
                        FIRST_FAILURE.compareAndSet(null, "status " + r.getSendStatus());
                    }
                    room.release();
                    done.countDown();
                }

                public void onException(Throwable e) {
                    failed.incrementAndGet();
                    FIRST_FAILURE.compareAndSet(null, String.valueOf(e));
                    room.release();
                    done.countDown();
                }
            });
        }
        if (!done.await(300, TimeUnit.SECONDS)) {
            throw new IllegalStateException("async sends unanswered after 300 s");
        }
        return failed.get();
    }

    static void produce(String ns, String topic, int total, int inflight, double warmupS)
            throws Exception {
        byte[] body = new byte[1024];
        Arrays.fill(body, (byte) 'x');
        DefaultMQProducer p = new DefaultMQProducer("bench_java_pg_" + System.nanoTime());
        p.setNamesrvAddr(ns);
        p.setInstanceName("benchp_" + System.nanoTime());
        p.start();
        long warmEnd = System.nanoTime() + (long) (warmupS * 1e9);
        long warm = 0;
        while (System.nanoTime() < warmEnd || warm == 0) {
            sendAsync(p, topic, body, Math.min(total, 10_000), inflight);
            warm += Math.min(total, 10_000);
        }
        long cpu0 = cpuNanos();
        long t0 = System.nanoTime();
        int failed = sendAsync(p, topic, body, total, inflight);
        long dt = System.nanoTime() - t0;
        long cpu = cpuNanos() - cpu0;
        if (failed > 0) {
            throw new IllegalStateException(failed + " async sends failed, the first: "
                + FIRST_FAILURE.get());
        }
        // printed before shutdown: the client's threads log their closing to stdout too
        System.out.printf("{\"rate\": %.1f, \"cpu_us\": %.3f, \"warm_msgs\": %d}%n",
            total / (dt / 1e9), cpu / 1e3 / total, warm);
        System.out.flush();
        p.shutdown();
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("rocketmq.client.logRoot", System.getProperty("java.io.tmpdir"));
        try {
            if (args[0].equals("consume")) {
                consume(args[1], args[2], Integer.parseInt(args[3]), Double.parseDouble(args[4]));
            } else if (args[0].equals("latency")) {
                latency(args[1], args[2], Integer.parseInt(args[3]));
            } else if (args[0].equals("produce")) {
                produce(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                        Double.parseDouble(args[5]));
            } else {
                throw new IllegalArgumentException("mode: consume | latency | produce");
            }
            System.out.flush();
            System.exit(0);
        } catch (Exception e) {
            System.out.println("{\"error\": \"" + e.toString().replace("\"", "'") + "\"}");
            System.out.flush();
            System.exit(1);
        }
    }
}
