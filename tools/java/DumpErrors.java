// Prints Kafka's protocol error table as TSV (code, name, retriable): one line per
// org.apache.kafka.common.protocol.Errors constant, "retriable" meaning the Java
// client's exception for it is a RetriableException. Run by tools/kafka_specs.py
// with the kafka-clients jar of the Kafka version whose specs kpax is generated from.
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;

public class DumpErrors {
    public static void main(String[] args) {
        StringBuilder out = new StringBuilder("code\tname\tretriable\n");
        for (Errors e : Errors.values()) {
            boolean retriable = e.exception() instanceof RetriableException;
            out.append(e.code()).append('\t').append(e.name()).append('\t').append(retriable).append('\n');
        }
        System.out.print(out);
    }
}
