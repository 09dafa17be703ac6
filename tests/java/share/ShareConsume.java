/*
 * A member of a KIP-932 share group run by Apache Kafka's own KafkaShareConsumer: the Java
 * side of kpax's share-consumer interop tests (driven by tests/interop/share_java.py).
 *
 *   java -cp <classes>:<kafka jars> ShareConsume BOOTSTRAP GROUP TOPIC [options]
 *
 * Options (the member stops at the first stop condition met; at least one is needed):
 *   --earliest            before subscribing, set the group config
 *                         share.auto.offset.reset=earliest (Admin incrementalAlterConfigs on
 *                         ConfigResource(GROUP, group)); a share group otherwise starts at the
 *                         partitions' latest offsets
 *   --stdin               stop when a line "stop" arrives on stdin (or stdin ends)
 *   --stop-file PATH      stop when PATH exists and holds "stop"
 *   --idle-seconds S      stop after S seconds without a record (counted from the start, then
 *                         from the last record)
 *   --max-records N       stop once N records have been accepted
 *   --poll-ms MS          poll timeout (default 200)
 *   --property K=V        an extra KafkaShareConsumer property (repeatable)
 *
 * Records are acknowledged implicitly (share.acknowledgement.mode=implicit: every record of a
 * poll is ACCEPTed); after each non-empty poll the member commits those acknowledgements
 * (commitSync) and prints, for every record whose partition's acknowledgement the broker took,
 * one line on stdout, flushed at once:
 *
 *   partition offset delivery_count value_hex        ("-" for a null value)
 *
 * A record whose acknowledgement failed is reported on stderr ("ack-failed ...") instead. Only
 * those lines go to stdout: the client's own logging is sent to stderr. Progress lines on
 * stderr: "subscribed", "stopping: <why>", "closed". The member closes cleanly (leaves the
 * group) and exits 0; on an error it prints the exception on stderr and exits 1.
 */

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareConsume {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    static String hex(byte[] value) {
        if (value == null) {
            return "-";
        }
        if (value.length == 0) {
            return "";
        }
        char[] out = new char[value.length * 2];
        for (int i = 0; i < value.length; i++) {
            out[2 * i] = HEX[(value[i] >> 4) & 0xf];
            out[2 * i + 1] = HEX[value[i] & 0xf];
        }
        return new String(out);
    }

    static void setEarliest(String bootstrap, String group) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp op = new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"),
                    AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get();
        }
    }

    public static void main(String[] args) throws Exception {
        // Record lines own stdout; anything else that prints there (logging) goes to stderr.
        PrintStream out = new PrintStream(
                new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length < 3) {
            System.err.println("usage: ShareConsume BOOTSTRAP GROUP TOPIC [--earliest] [--stdin] "
                    + "[--stop-file PATH] [--idle-seconds S] [--max-records N] [--poll-ms MS] "
                    + "[--property K=V]...");
            System.exit(2);
        }
        String bootstrap = args[0];
        String group = args[1];
        String topic = args[2];
        boolean earliest = false;
        boolean stdin = false;
        Path stopFile = null;
        double idleSeconds = -1;
        long maxRecords = -1;
        long pollMs = 200;
        Properties props = new Properties();
        for (int i = 3; i < args.length; i++) {
            switch (args[i]) {
                case "--earliest" -> earliest = true;
                case "--stdin" -> stdin = true;
                case "--stop-file" -> stopFile = Path.of(args[++i]);
                case "--idle-seconds" -> idleSeconds = Double.parseDouble(args[++i]);
                case "--max-records" -> maxRecords = Long.parseLong(args[++i]);
                case "--poll-ms" -> pollMs = Long.parseLong(args[++i]);
                case "--property" -> {
                    String kv = args[++i];
                    int eq = kv.indexOf('=');
                    if (eq <= 0) {
                        throw new IllegalArgumentException("--property wants K=V, got " + kv);
                    }
                    props.put(kv.substring(0, eq), kv.substring(eq + 1));
                }
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (!stdin && stopFile == null && idleSeconds < 0 && maxRecords < 0) {
            throw new IllegalArgumentException(
                    "no stop condition: give --stdin, --stop-file, --idle-seconds or --max-records");
        }
        if (earliest) {
            setEarliest(bootstrap, group);
        }
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.putIfAbsent("share.acknowledgement.mode", "implicit");
        props.putIfAbsent("client.id", "share-consume-" + ProcessHandle.current().pid());

        AtomicReference<String> stopReason = new AtomicReference<>();
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(
                props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            if (stdin) {
                Thread reader = new Thread(() -> {
                    try (BufferedReader in = new BufferedReader(
                            new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                        String line;
                        while ((line = in.readLine()) != null) {
                            if (line.trim().equals("stop")) {
                                break;
                            }
                        }
                    } catch (Exception e) {
                        // stdin gone: stop as if told to
                    }
                    stopReason.compareAndSet(null, "stdin");  // seen after the current poll
                }, "stdin-stop");
                reader.setDaemon(true);
                reader.start();
            }
            consumer.subscribe(List.of(topic));
            System.err.println("subscribed");
            long accepted = 0;
            long lastRecord = System.nanoTime();
            Duration pollTimeout = Duration.ofMillis(pollMs);
            while (stopReason.get() == null) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(pollTimeout);
                if (!records.isEmpty()) {
                    lastRecord = System.nanoTime();
                    Map<TopicIdPartition, Optional<KafkaException>> acks =
                            consumer.commitSync(Duration.ofSeconds(30));
                    Set<TopicPartition> failed = new HashSet<>();
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : acks.entrySet()) {
                        if (e.getValue().isPresent()) {
                            failed.add(e.getKey().topicPartition());
                            System.err.println("ack-failed " + e.getKey() + " " + e.getValue().get());
                        }
                    }
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                        short count = r.deliveryCount().orElse((short) -1);
                        if (failed.contains(tp)) {
                            System.err.println("ack-failed " + r.partition() + " " + r.offset());
                            continue;
                        }
                        out.println(r.partition() + " " + r.offset() + " " + count + " "
                                + hex(r.value()));
                        out.flush();
                        accepted++;
                    }
                    if (maxRecords >= 0 && accepted >= maxRecords) {
                        stopReason.compareAndSet(null, "max-records " + accepted);
                    }
                } else if (idleSeconds >= 0
                        && (System.nanoTime() - lastRecord) / 1e9 >= idleSeconds) {
                    stopReason.compareAndSet(null, "idle " + idleSeconds + "s");
                }
                if (stopFile != null && Files.isRegularFile(stopFile)) {
                    String said = Files.readString(stopFile, StandardCharsets.UTF_8).trim();
                    if (said.equals("stop")) {
                        stopReason.compareAndSet(null, "stop-file");
                    }
                }
            }
            System.err.println("stopping: " + stopReason.get());
        }
        System.err.println("closed");
        out.flush();
    }
}
