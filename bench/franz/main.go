// Command franz-bench is the franz-go peer of kpax's producer and consumer
// benchmarks (bench/producer.py, bench/consumer.py). It does what the Python
// peers do, with the same records and settings, and prints the same
// "RESULT {json}" line that bench/harness.py parses.
//
//	franz-bench produce      -brokers B -topic T -records N -size 100 -acks 1|all -compression none|lz4
//	                         [-linger-ms 5] [-batch-bytes 16384] [-keyed]
//	franz-bench consume      -brokers B -topic T -records N -partitions P
//	franz-bench commit-latency -brokers B -topic T -records N -commits C
//	franz-bench commit-loop  -brokers B -topic T -records N
//
// produce: N values of -size random bytes (a pool of 10,000), no key or with
// -keyed the key "key-<i>" (the i-th record's; keys made before the clock
// starts, partitioned by franz-go's default partitioner: murmur2 of the key,
// as Java's), after one warm-up record; timed from the first Produce to
// Flush's return (every record acknowledged). -linger-ms and -batch-bytes
// (ProducerLinger, ProducerBatchMaxBytes) are left at franz-go's defaults
// (v1.22.2: 10 ms, 1,000,012 bytes) when not given (-1, 0). acks=all keeps
// franz-go's default idempotence, acks=1 needs it off (as for every client).
// The RESULT line also gives the process's peak RSS (rss_peak_mb, MiB).
//
// consume: assigned partitions from the start, no group; timed from the
// first poll (after a Ping) to the N-th record; every value is touched.
//
// commit-latency: a group member (auto commit off, fetch max wait 500 ms)
// polls the topic's N records, then makes C synchronous commits, each of a
// new offset (N-C+1 ... N) so that none can be skipped as unchanged; prints
// every commit's latency.
//
// commit-loop: a group member polls at most 500 records at a time and
// commits its position synchronously after each poll (at-least-once); timed
// from the end of the first non-empty poll (and its commit) to the N-th
// record; also reports the time from the client's start to those first records.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type result struct {
	Records   int       `json:"records"`
	Bytes     int       `json:"bytes"`
	Seconds   float64   `json:"seconds"`
	Latencies []float64 `json:"latencies_ms,omitempty"`
	FirstRecs float64   `json:"first_records_s,omitempty"`
	RSSPeakMB float64   `json:"rss_peak_mb,omitempty"`
}

// peakRSS is the process's peak resident set size in MiB: VmHWM of /proc/self/status
// (getrusage's ru_maxrss would start from the RSS of the process that forked this one);
// 0 where there is no /proc.
func peakRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

func emit(r result) {
	b, err := json.Marshal(r)
	if err != nil {
		die("encode result: %v", err)
	}
	fmt.Printf("RESULT %s\n", b)
}

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "franz-bench: "+format+"\n", args...)
	os.Exit(1)
}

type options struct {
	brokers     []string
	topic       string
	records     int
	size        int
	acks        string
	compression string
	partitions  int
	commits     int
	group       string
	lingerMs    int
	batchBytes  int
	keyed       bool
}

func main() {
	if len(os.Args) < 2 {
		die("usage: franz-bench produce|consume|commit-latency|commit-loop [flags]")
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	o := options{}
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.IntVar(&o.records, "records", 100000, "records")
	fs.IntVar(&o.size, "size", 100, "value size in bytes")
	fs.StringVar(&o.acks, "acks", "1", "1, all or 0")
	fs.StringVar(&o.compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.IntVar(&o.partitions, "partitions", 1, "partitions to consume")
	fs.IntVar(&o.commits, "commits", 100, "commits to time (commit-latency)")
	fs.StringVar(&o.group, "group", "", "group id (commit-*)")
	fs.IntVar(&o.lingerMs, "linger-ms", -1, "ProducerLinger in ms (-1: franz-go's default)")
	fs.IntVar(&o.batchBytes, "batch-bytes", 0, "ProducerBatchMaxBytes (0: franz-go's default)")
	fs.BoolVar(&o.keyed, "keyed", false, "produce: key each record key-<i>")
	if err := fs.Parse(os.Args[2:]); err != nil {
		die("%v", err)
	}
	o.brokers = strings.Split(*brokers, ",")
	if o.topic == "" {
		die("-topic is required")
	}
	switch mode {
	case "produce":
		produce(o)
	case "consume":
		consume(o)
	case "commit-latency":
		commitLatency(o)
	case "commit-loop":
		commitLoop(o)
	default:
		die("unknown mode %q", mode)
	}
}

// ---------------------------------------------------------------- produce

func codec(name string) kgo.CompressionCodec {
	switch name {
	case "none":
		return kgo.NoCompression()
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	die("unknown compression %q", name)
	return kgo.NoCompression()
}

func produce(o options) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.brokers...),
		kgo.ProducerBatchCompression(codec(o.compression)),
	}
	if o.lingerMs >= 0 {
		opts = append(opts, kgo.ProducerLinger(time.Duration(o.lingerMs)*time.Millisecond))
	}
	if o.batchBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(o.batchBytes)))
	}
	switch o.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		die("bad -acks %q", o.acks)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		die("new client: %v", err)
	}
	defer cl.Close()
	ctx := context.Background()

	rnd := rand.New(rand.NewSource(42))
	pool := make([][]byte, min(o.records, 10000))
	for i := range pool {
		pool[i] = make([]byte, o.size)
		rnd.Read(pool[i])
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: o.topic, Value: []byte("warm-up")}).FirstErr(); err != nil {
		die("warm-up record: %v", err)
	}

	var failed atomic.Int64
	var firstErr atomic.Value
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		}
	}
	var keys [][]byte
	if o.keyed {
		keys = make([][]byte, o.records)
		for i := range keys {
			keys[i] = []byte(fmt.Sprintf("key-%d", i))
		}
	}
	t0 := time.Now()
	for i := 0; i < o.records; i++ {
		rec := &kgo.Record{Topic: o.topic, Value: pool[i%len(pool)]}
		if keys != nil {
			rec.Key = keys[i]
		}
		cl.Produce(ctx, rec, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		die("flush: %v", err)
	}
	elapsed := time.Since(t0).Seconds()
	if n := failed.Load(); n > 0 {
		die("%d of %d records failed, first: %v", n, o.records, firstErr.Load())
	}
	emit(result{Records: o.records, Bytes: o.records * o.size, Seconds: elapsed, RSSPeakMB: peakRSS()})
}

// ---------------------------------------------------------------- consume

func check(fetches kgo.Fetches) {
	for _, fe := range fetches.Errors() {
		die("fetch %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
	}
}

func consume(o options) {
	parts := make(map[int32]kgo.Offset, o.partitions)
	for p := 0; p < o.partitions; p++ {
		parts[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(o.brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: parts}),
	)
	if err != nil {
		die("new client: %v", err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Ping(ctx); err != nil {
		die("ping: %v", err)
	}
	n, nbytes := 0, 0
	t0 := time.Now()
	for n < o.records {
		fetches := cl.PollFetches(ctx)
		check(fetches)
		for it := fetches.RecordIter(); !it.Done(); {
			nbytes += len(it.Next().Value)
			n++
		}
	}
	emit(result{Records: n, Bytes: nbytes, Seconds: time.Since(t0).Seconds()})
}

// ---------------------------------------------------------------- commits

func groupClient(o options) *kgo.Client {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(o.brokers...),
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond), // the Java default, as the other clients
	)
	if err != nil {
		die("new client: %v", err)
	}
	return cl
}

// pollSome polls (at most limit records at a time) until it gets records; returns them.
func pollSome(ctx context.Context, cl *kgo.Client, limit int) []*kgo.Record {
	for {
		fetches := cl.PollRecords(ctx, limit)
		check(fetches)
		if recs := fetches.Records(); len(recs) > 0 {
			return recs
		}
	}
}

// commitErr is an OffsetCommit's error: the request's, else the first partition's.
func commitErr(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
				return perr
			}
		}
	}
	return nil
}

func commitLatency(o options) {
	cl := groupClient(o)
	defer cl.Close()
	ctx := context.Background()
	n := 0
	for n < o.records {
		n += len(pollSome(ctx, cl, 500))
	}
	time.Sleep(200 * time.Millisecond) // idle: the next fetch is a long poll
	lat := make([]float64, 0, o.commits)
	for i := 0; i < o.commits; i++ {
		off := int64(o.records - o.commits + 1 + i)
		offsets := map[string]map[int32]kgo.EpochOffset{o.topic: {0: {Epoch: -1, Offset: off}}}
		var cerr error
		t := time.Now()
		cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = commitErr(resp, err)
		})
		lat = append(lat, float64(time.Since(t).Microseconds())/1000)
		if cerr != nil {
			die("commit %d: %v", off, cerr)
		}
	}
	total := 0.0
	for _, l := range lat {
		total += l
	}
	emit(result{Records: o.commits, Bytes: 0, Seconds: total / 1000, Latencies: lat})
}

func commitLoop(o options) {
	tSub := time.Now()
	cl := groupClient(o)
	defer cl.Close()
	ctx := context.Background()
	first := len(pollSome(ctx, cl, 500)) // group join, offsets, first fetch: not timed
	firstRecs := time.Since(tSub).Seconds()
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		die("commit: %v", err)
	}
	n, nbytes := 0, 0
	t0 := time.Now()
	for first+n < o.records {
		for _, r := range pollSome(ctx, cl, 500) {
			nbytes += len(r.Value)
			n++
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			die("commit: %v", err)
		}
	}
	emit(result{Records: n, Bytes: nbytes, Seconds: time.Since(t0).Seconds(), FirstRecs: firstRecs})
}
