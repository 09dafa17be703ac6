// The Java client's partition choice for keys, for tests/integration/test_java_partitioner.py.
// stdin: first line the partition counts (space separated), then one key per line in hex
// (an empty line is the empty key). stdout: per key, murmur2 then the partition for each count.
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;

public class PartitionerCheck {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII));
        String[] countsText = in.readLine().trim().split(" ");
        int[] counts = new int[countsText.length];
        for (int i = 0; i < counts.length; i++) counts[i] = Integer.parseInt(countsText[i]);
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            byte[] key = new byte[line.length() / 2];
            for (int i = 0; i < key.length; i++)
                key[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
            StringBuilder sb = new StringBuilder().append(Utils.murmur2(key));
            for (int n : counts) {
                int p = BuiltInPartitioner.partitionForKey(key, n);
                if (p != Utils.toPositive(Utils.murmur2(key)) % n) throw new IllegalStateException("mismatch");
                sb.append(' ').append(p);
            }
            out.write(sb.append('\n').toString());
        }
        out.flush();
    }
}
