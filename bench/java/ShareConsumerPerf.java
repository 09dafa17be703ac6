/*
 * The Java peer of bench/share.py: share-group (KIP-932) consumption throughput of Apache
 * Kafka's own KafkaShareConsumer. M members (threads, each with its own KafkaShareConsumer)
 * of share group G read N records of a topic with implicit acknowledgement (every record of
 * a poll is ACCEPTed with the next poll; the last ones when the member closes).
 *
 *   java -cp <classes>:<kafka jars> ShareConsumerPerf --bootstrap B --topic T --group G
 *        --records N [--threads M] [--warmup-records W] [--earliest] [--earliest-only]
 *        [--poll-ms 100] [--timeout-ms 60000] [--consumer-props K=V ...]
 *
 * Like WarmProducerPerformance, a warm-up run comes first in the same JVM (its own share
 * group G-warmup, share.auto.offset.reset=earliest set on it here, min(W, N) records, same
 * thread count; its output marked, not reported), so the timed figure is not one of a cold
 * JIT. --earliest sets share.auto.offset.reset=earliest on G first (Admin
 * incrementalAlterConfigs on ConfigResource(GROUP, G)); --earliest-only does only that and
 * exits.
 *
 * Timing (the same as bench/share.py's Python members): every member is created and
 * subscribed, then all start polling together; the clock starts when the first non-empty
 * poll of any member returns (group join and assignment excluded) and stops when the
 * records received reach N. The first batch is not counted. Printed on stdout:
 *
 *   RESULT {"records": n, "bytes": b, "seconds": s, "redelivered": r, "members": M, ...}
 *
 * (records after the first batch, their value bytes, and how many arrived with a delivery
 * count above 1). No progress for --timeout-ms: exit 1.
 */

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareConsumerPerf {
    static String bootstrap;
    static String topic;
    static String group;
    static long records = -1;
    static int threads = 1;
    static long warmupRecords = 200_000;
    static boolean earliest;
    static boolean earliestOnly;
    static long pollMs = 100;
    static long timeoutMs = 60_000;
    static final Properties extra = new Properties();

    static void setEarliest(String groupId) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, groupId);
            AlterConfigOp op = new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"),
                    AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get();
        }
    }

    /** One run's figures. */
    record Outcome(long records, long bytes, double seconds, long redelivered, double firstS) { }

    static Outcome run(String groupId, long want, int members) throws Exception {
        List<KafkaShareConsumer<byte[], byte[]>> consumers = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            Properties props = new Properties();
            props.putAll(extra);
            props.put("bootstrap.servers", bootstrap);
            props.put("group.id", groupId);
            props.putIfAbsent("share.acknowledgement.mode", "implicit");
            props.put("client.id", "share-perf-" + i);
            KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(
                    props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            c.subscribe(List.of(topic));
            consumers.add(c);
        }
        AtomicLong total = new AtomicLong();
        AtomicLong counted = new AtomicLong();
        AtomicLong bytes = new AtomicLong();
        AtomicLong redelivered = new AtomicLong();
        AtomicLong firstNanos = new AtomicLong();
        AtomicLong endNanos = new AtomicLong();
        AtomicLong lastProgress = new AtomicLong(System.nanoTime());
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch go = new CountDownLatch(1);
        long started = System.nanoTime();
        List<Thread> workers = new ArrayList<>();
        for (KafkaShareConsumer<byte[], byte[]> c : consumers) {
            Thread t = new Thread(() -> {
                try {
                    go.await();
                    Duration timeout = Duration.ofMillis(pollMs);
                    while (endNanos.get() == 0 && failure.get() == null) {
                        ConsumerRecords<byte[], byte[]> recs = c.poll(timeout);
                        long now = System.nanoTime();
                        if (recs.isEmpty()) {
                            if ((now - lastProgress.get()) / 1_000_000 > timeoutMs) {
                                failure.compareAndSet(null, new RuntimeException(
                                        "no records for " + timeoutMs + " ms after "
                                        + total.get() + " of " + want));
                            }
                            continue;
                        }
                        lastProgress.set(now);
                        long n = 0;
                        long b = 0;
                        long again = 0;
                        for (ConsumerRecord<byte[], byte[]> r : recs) {
                            byte[] v = r.value();
                            b += v == null ? 0 : v.length;
                            if (r.deliveryCount().orElse((short) 1) > 1) {
                                again++;
                            }
                            n++;
                        }
                        boolean first = firstNanos.compareAndSet(0, now);
                        if (!first) {
                            counted.addAndGet(n);
                            bytes.addAndGet(b);
                        }
                        redelivered.addAndGet(again);
                        if (total.addAndGet(n) >= want) {
                            endNanos.compareAndSet(0, now);
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "share-member");
            workers.add(t);
            t.start();
        }
        go.countDown();
        for (Thread t : workers) {
            t.join();
        }
        for (KafkaShareConsumer<byte[], byte[]> c : consumers) {
            c.close();  // the last implicit acknowledgements, then leave the group
        }
        if (failure.get() != null) {
            throw new RuntimeException("share consumption failed", failure.get());
        }
        double seconds = (endNanos.get() - firstNanos.get()) / 1e9;
        double firstS = (firstNanos.get() - started) / 1e9;
        return new Outcome(counted.get(), bytes.get(), seconds, redelivered.get(), firstS);
    }

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[++i];
                case "--topic" -> topic = args[++i];
                case "--group" -> group = args[++i];
                case "--records" -> records = Long.parseLong(args[++i]);
                case "--threads" -> threads = Integer.parseInt(args[++i]);
                case "--warmup-records" -> warmupRecords = Long.parseLong(args[++i]);
                case "--earliest" -> earliest = true;
                case "--earliest-only" -> earliestOnly = true;
                case "--poll-ms" -> pollMs = Long.parseLong(args[++i]);
                case "--timeout-ms" -> timeoutMs = Long.parseLong(args[++i]);
                case "--consumer-props" -> {
                    while (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                        String kv = args[++i];
                        int eq = kv.indexOf('=');
                        if (eq <= 0) {
                            throw new IllegalArgumentException("--consumer-props wants K=V: " + kv);
                        }
                        extra.put(kv.substring(0, eq), kv.substring(eq + 1));
                    }
                }
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (bootstrap == null || group == null) {
            throw new IllegalArgumentException("--bootstrap and --group are required");
        }
        if (earliestOnly) {
            setEarliest(group);
            System.out.println("EARLIEST SET " + group);
            return;
        }
        if (topic == null || records <= 0 || threads <= 0) {
            throw new IllegalArgumentException("--topic, --records > 0 and --threads > 0 needed");
        }
        long warm = Math.min(warmupRecords, records);
        if (warm > 0) {
            String warmGroup = group + "-warmup";
            setEarliest(warmGroup);
            System.out.println("WARM-UP BEGIN");
            Outcome w = run(warmGroup, warm, threads);
            System.out.printf("warm-up: %d records in %.3f s%n", w.records(), w.seconds());
            System.out.println("WARM-UP END");
        }
        if (earliest) {
            setEarliest(group);
        }
        Outcome o = run(group, records, threads);
        System.out.printf(java.util.Locale.ROOT,
                "RESULT {\"records\": %d, \"bytes\": %d, \"seconds\": %.6f, \"redelivered\": %d, "
                        + "\"members\": %d, \"first_records_s\": %.3f}%n",
                o.records(), o.bytes(), o.seconds(), o.redelivered(), threads, o.firstS());
        System.out.flush();
    }
}
