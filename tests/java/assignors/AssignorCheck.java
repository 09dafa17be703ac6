// The Java client's consumer protocol bytes and assignor results, for
// tests/integration/test_java_assignors.py. One case per stdin line, one answer per stdout line.
// Strings are hex (UTF-8), "-" is null or an empty list, USERDATA is "x" + hex. Lines:
//   sub VERSION TOPICS USERDATA OWNED GENERATION RACK  -> hex of serializeSubscription
//   asg VERSION PARTS USERDATA                         -> hex of serializeAssignment
//   sticky PARTS GENERATION / coop GENERATION          -> hex of the assignor's user data
//   assign NAME COUNTS MEMBERS                         -> member=parts;member=parts...
// TOPICS: t,t  PARTS/OWNED: t:p,t:p  COUNTS: t:n,t:n  MEMBERS: id/instance/t+t;id/instance/t
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;

public class AssignorCheck {
    static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return b;
    }
    static String str(String hex) { return hex.equals("-") ? null : new String(unhex(hex), StandardCharsets.UTF_8); }
    static String hex(byte[] b) { StringBuilder sb = new StringBuilder(); for (byte x : b) sb.append(String.format("%02x", x)); return sb.toString(); }
    static String hex(String s) { return hex(s.getBytes(StandardCharsets.UTF_8)); }
    static String hex(ByteBuffer buf) { ByteBuffer d = buf.duplicate(); byte[] b = new byte[d.remaining()]; d.get(b); return hex(b); }
    // Byte strings are "x" + hex, so that empty bytes are "x".
    static ByteBuffer bytes(String hex) { return hex.equals("-") ? null : ByteBuffer.wrap(unhex(hex.substring(1))); }
    static List<String> items(String s, String sep) { return s.equals("-") ? new ArrayList<>() : new ArrayList<>(Arrays.asList(s.split(sep))); }
    static List<TopicPartition> parts(String s) {
        List<TopicPartition> out = new ArrayList<>();
        for (String item : items(s, ",")) { String[] kv = item.split(":"); out.add(new TopicPartition(str(kv[0]), Integer.parseInt(kv[1]))); }
        return out;
    }

    @SuppressWarnings("removal")
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(System.out, false, "US-ASCII");
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "sub": {
                    List<String> topics = new ArrayList<>();
                    for (String t : items(f[2], ",")) topics.add(str(t));
                    Subscription s = new Subscription(topics, bytes(f[3]), parts(f[4]), Integer.parseInt(f[5]), Optional.ofNullable(str(f[6])));
                    out.println(hex(ConsumerProtocol.serializeSubscription(s, Short.parseShort(f[1]))));
                    break;
                }
                case "asg":
                    out.println(hex(ConsumerProtocol.serializeAssignment(new Assignment(parts(f[2]), bytes(f[3])), Short.parseShort(f[1]))));
                    break;
                case "sticky": {
                    StickyAssignor a = new StickyAssignor();
                    a.onAssignment(new Assignment(parts(f[1])), new ConsumerGroupMetadata("g", Integer.parseInt(f[2]), "m", Optional.empty()));
                    out.println(hex(a.subscriptionUserData(new HashSet<>())));
                    break;
                }
                case "coop": {
                    CooperativeStickyAssignor a = new CooperativeStickyAssignor();
                    a.onAssignment(new Assignment(new ArrayList<>()), new ConsumerGroupMetadata("g", Integer.parseInt(f[1]), "m", Optional.empty()));
                    out.println(hex(a.subscriptionUserData(new HashSet<>())));
                    break;
                }
                case "assign": {
                    Map<String, Integer> counts = new HashMap<>();
                    for (String item : items(f[2], ",")) { String[] kv = item.split(":"); counts.put(str(kv[0]), Integer.parseInt(kv[1])); }
                    Map<String, Subscription> subs = new HashMap<>();
                    for (String m : items(f[3], ";")) {
                        String[] p = m.split("/", -1);
                        List<String> topics = new ArrayList<>();
                        for (String t : items(p[2], "\\+")) topics.add(str(t));
                        Subscription s = new Subscription(topics);
                        s.setGroupInstanceId(Optional.ofNullable(str(p[1])));
                        subs.put(str(p[0]), s);
                    }
                    Map<String, List<TopicPartition>> result = f[1].equals("range")
                        ? new RangeAssignor().assign(counts, subs) : new RoundRobinAssignor().assign(counts, subs);
                    StringBuilder sb = new StringBuilder();
                    for (Map.Entry<String, List<TopicPartition>> e : result.entrySet()) {
                        if (sb.length() > 0) sb.append(';');
                        sb.append(hex(e.getKey())).append('=');
                        List<String> ps = new ArrayList<>();
                        for (TopicPartition tp : e.getValue()) ps.add(hex(tp.topic()) + ":" + tp.partition());
                        sb.append(ps.isEmpty() ? "-" : String.join(",", ps));
                    }
                    out.println(sb);
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown case " + f[0]);
            }
        }
        out.flush();
    }
}
