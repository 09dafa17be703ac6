// Test helper for tests/integration/test_java_records.py: builds record batches with
// the Java client's MemoryRecordsBuilder and decodes batches written by kpax, one JVM
// run for every case. @RECORD_PKG@ is replaced by the record package of the
// kafka-clients version in use (org.apache.kafka.common.record[.internal]).
//
// Usage: java RecordsHelper DIR   (DIR/cases.txt lines: "name codec magic count baseOffset")
// Writes DIR/java-NAME.bin (Java's batch) and DIR/decoded-NAME.txt (Java's reading of
// DIR/kpax-NAME.bin: one line per record "offset timestamp key value headers").
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import @RECORD_PKG@.CompressionType;
import @RECORD_PKG@.MemoryRecords;
import @RECORD_PKG@.MemoryRecordsBuilder;
import @RECORD_PKG@.MutableRecordBatch;
import @RECORD_PKG@.Record;

public class RecordsHelper {
    static byte[] utf8(String s) { return s.getBytes(StandardCharsets.UTF_8); }

    // The same recipe as records_recipe() in the Python test.
    static long timestamp(int i) { return 1700000000000L + 3L * i; }
    static byte[] key(int i) { return i % 5 == 0 ? null : utf8("key-" + i); }
    static byte[] value(int i) {
        if (i % 7 == 3) return null;
        return utf8("value-" + i + "-" + "x".repeat((i * 11) % 300));
    }
    static Header[] headers(int i, int magic) {
        if (magic < 2 || i % 2 == 0) return new Header[0];
        return new Header[] {new RecordHeader("trace", utf8("t" + i)), new RecordHeader("empty", (byte[]) null)};
    }

    static String hex(ByteBuffer b) {
        if (b == null) return "-";
        StringBuilder sb = new StringBuilder("x");
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get()));
        return sb.toString();
    }

    static String hex(byte[] b) { return b == null ? "-" : hex(ByteBuffer.wrap(b)); }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        for (String line : Files.readAllLines(dir.resolve("cases.txt"))) {
            if (line.isBlank()) continue;
            String[] f = line.trim().split(" ");
            String name = f[0];
            CompressionType type = CompressionType.forName(f[1]);
            byte magic = Byte.parseByte(f[2]);
            int count = Integer.parseInt(f[3]);
            long baseOffset = Long.parseLong(f[4]);
            ByteBuffer buf = ByteBuffer.allocate(1 << 22);
            MemoryRecordsBuilder builder = MemoryRecords.builder(
                buf, magic, Compression.of(type).build(), TimestampType.CREATE_TIME, baseOffset);
            for (int i = 0; i < count; i++) {
                builder.append(magic == 0 ? -1L : timestamp(i), key(i), value(i), headers(i, magic));
            }
            ByteBuffer out = builder.build().buffer();
            byte[] bytes = new byte[out.remaining()];
            out.get(bytes);
            Files.write(dir.resolve("java-" + name + ".bin"), bytes);

            MemoryRecords theirs = MemoryRecords.readableRecords(
                ByteBuffer.wrap(Files.readAllBytes(dir.resolve("kpax-" + name + ".bin"))));
            try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(dir.resolve("decoded-" + name + ".txt")))) {
                for (MutableRecordBatch batch : theirs.batches()) {
                    batch.ensureValid();
                    w.println("batch " + batch.magic() + " " + batch.compressionType().name + " "
                        + batch.baseOffset() + " " + batch.lastOffset() + " " + batch.maxTimestamp());
                    for (Record r : batch) {
                        r.ensureValid();
                        StringBuilder hs = new StringBuilder();
                        for (Header h : r.headers()) {
                            hs.append(h.key()).append(':').append(hex(h.value())).append(',');
                        }
                        w.println(r.offset() + " " + r.timestamp() + " " + hex(r.key()) + " "
                            + hex(r.value()) + " " + (hs.length() == 0 ? "." : hs.toString()));
                    }
                }
            }
        }
    }
}
