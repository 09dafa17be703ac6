/*
 * The Java peer of bench/producer.py's keyed scenarios: a KafkaProducer sending N records of
 * S random bytes (a pool of 10,000, seed 42) keyed "key-<i>" (the i-th record's; keys made
 * before the clock starts; the default partitioner: murmur2 of the key), run twice in one
 * JVM: first a warm-up of W records (own producer, same topic and settings, not reported),
 * then the timed run, so the figure is not one of a cold JIT. (Apache Kafka's
 * ProducerPerformance, the peer of the keyless scenarios, cannot key records.) Timed from
 * the first send to the return of flush() (every record acknowledged); a failed record
 * fails the run. Prints the harness's line: RESULT {"records": N, "bytes": N*S, "seconds": T}.
 * Run as a single-file source program:
 *
 *   java -cp <kafka-clients classpath> bench/java/KeyedProducerPerf.java W T N S k=v [k=v ...]
 *
 * (W warm-up records, T topic, N records, S value size, then producer properties such as
 * bootstrap.servers=host:port, acks=all, linger.ms=5.)
 */

import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KeyedProducerPerf {
    static double run(Properties props, String topic, int n, byte[][] pool, String prefix)
            throws Exception {
        byte[][] keys = new byte[n][];
        for (int i = 0; i < n; i++) {
            keys[i] = (prefix + i).getBytes(StandardCharsets.UTF_8);
        }
        AtomicLong failed = new AtomicLong();
        AtomicReference<Exception> first = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> p =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            p.send(new ProducerRecord<>(topic, "warm-up".getBytes(StandardCharsets.UTF_8))).get();
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, keys[i], pool[i % pool.length]), (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        first.compareAndSet(null, e);
                    }
                });
            }
            p.flush();
            double seconds = (System.nanoTime() - t0) / 1e9;
            if (failed.get() > 0) {
                throw new RuntimeException(
                        failed.get() + " of " + n + " records failed", first.get());
            }
            return seconds;
        }
    }

    public static void main(String[] args) throws Exception {
        int warm = Integer.parseInt(args[0]);
        String topic = args[1];
        int n = Integer.parseInt(args[2]);
        int size = Integer.parseInt(args[3]);
        Properties props = new Properties();
        for (int i = 4; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        Random rnd = new Random(42);
        byte[][] pool = new byte[Math.min(n, 10000)][size];
        for (byte[] v : pool) {
            rnd.nextBytes(v);
        }
        if (warm > 0) {
            run(props, topic, warm, pool, "warm-");
        }
        double seconds = run(props, topic, n, pool, "key-");
        System.out.printf(
                "RESULT {\"records\": %d, \"bytes\": %d, \"seconds\": %.6f}%n",
                n, (long) n * size, seconds);
    }
}
