// Test helper for tests/integration/test_java_serialization.py.
//
// Reads lines "<MessageName>\t<version>\t<json>" on stdin, builds the message with
// Apache Kafka's own generated classes (the <Name>Data JsonConverter reads the JSON),
// serializes it with MessageUtil and prints one line per input: "OK <hex>" or
// "ERR <reason>". One JVM serves every case.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;

public final class Serialize {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private static Method converter(String name) throws ReflectiveOperationException {
        String pkg = "org.apache.kafka.common.message.";
        Class<?> cls;
        try {
            cls = Class.forName(pkg + name + "DataJsonConverter");
        } catch (ClassNotFoundException e) {
            cls = Class.forName(pkg + name + "JsonConverter");
        }
        return cls.getMethod("read", JsonNode.class, short.class);
    }

    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\t", 3);
            try {
                short version = Short.parseShort(parts[1]);
                JsonNode node = mapper.readTree(parts[2]);
                Message msg = (Message) converter(parts[0]).invoke(null, node, version);
                ByteBufferAccessor acc = MessageUtil.toByteBufferAccessor(msg, version);
                ByteBuffer buf = acc.buffer();
                buf.rewind();
                StringBuilder sb = new StringBuilder(3 + buf.remaining() * 2).append("OK ");
                while (buf.hasRemaining()) {
                    int b = buf.get() & 0xff;
                    sb.append(HEX[b >> 4]).append(HEX[b & 15]);
                }
                out.println(sb);
            } catch (InvocationTargetException e) {
                out.println("ERR " + String.valueOf(e.getCause()).replace('\n', ' '));
            } catch (Exception e) {
                out.println("ERR " + String.valueOf(e).replace('\n', ' '));
            }
        }
        out.flush();
    }
}
