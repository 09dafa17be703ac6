/*
 * The Java peer of bench/producer.py: Apache Kafka's ProducerPerformance run twice in one
 * JVM, first a warm-up of N records (its output marked, not reported), then the timed run,
 * so the reported figure is not one of a cold JIT. Run as a single-file source program:
 *
 *   java -cp <kafka-tools classpath> bench/java/WarmProducerPerformance.java N <ProducerPerformance args>
 *
 * The warm-up run gets the same arguments with --num-records N (same topic, same settings,
 * its own KafkaProducer, closed before the timed run starts).
 */

import java.util.Arrays;
import org.apache.kafka.tools.ProducerPerformance;

public class WarmProducerPerformance {
    public static void main(String[] args) throws Exception {
        int warm = Integer.parseInt(args[0]);
        String[] timed = Arrays.copyOfRange(args, 1, args.length);
        if (warm > 0) {
            String[] warmup = timed.clone();
            int i = Arrays.asList(warmup).indexOf("--num-records");
            if (i < 0 || i + 1 >= warmup.length) {
                throw new IllegalArgumentException("--num-records is required");
            }
            warmup[i + 1] = Integer.toString(warm);
            System.out.println("WARM-UP BEGIN");
            ProducerPerformance.main(warmup);
            System.out.println("WARM-UP END");
        }
        ProducerPerformance.main(timed);
    }
}
