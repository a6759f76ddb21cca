// sarama-client: Sarama (Debian's 1.22.1) driven by tests/sarama.rs against the real broker.
//
//	produce      -topic T -codec C [-partition P] [-timestamps MS]   < "key\tvalue" or "value" lines
//	consume      -topic T [-partitions 0,1] -offset oldest|newest|N -count N [-linger D]
//	group-member -group G -topic T [-limit N] [-retention D]   (stops at -limit, else when stdin closes)
//	admin OP     ... (see runAdmin)
//
// Every subcommand takes -brokers HOST:PORT, -version (a sarama.KafkaVersion such as 0.8.2.0 or
// 2.2.0) and -timeout (the whole run's bound: past it the program exits 3, so a broker that
// stops answering fails the step instead of hanging it). Results are JSON objects, one per
// line on stdout; any error goes to stderr as "sarama-client CMD: error: ..." with exit 1.
// Sarama's own log goes to stderr, for the test to show when a step fails.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

var (
	command string
	outLock sync.Mutex
)

func main() {
	log.SetFlags(log.Lmicroseconds)
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	if len(os.Args) < 2 {
		fatalf("usage: sarama-client produce|consume|group-member|admin OP [flags]")
	}
	command = os.Args[1]
	args := os.Args[2:]
	switch command {
	case "produce":
		runProduce(args)
	case "consume":
		runConsume(args)
	case "group-member":
		runGroupMember(args)
	case "admin":
		if len(args) < 1 {
			fatalf("admin needs an operation")
		}
		command = "admin " + args[0]
		runAdmin(args[0], args[1:])
	default:
		fatalf("unknown subcommand %q", command)
	}
}

func fatalf(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama-client %s: error: %s\n", command, fmt.Sprintf(format, a...))
	os.Exit(1)
}

// emit writes one JSON object as a line; goroutines share stdout, so lines never interleave.
func emit(v interface{}) {
	line, err := json.Marshal(v)
	if err != nil {
		fatalf("encoding output: %v", err)
	}
	outLock.Lock()
	defer outLock.Unlock()
	fmt.Println(string(line))
}

// kafkaCode is the Kafka error code in err, or -1 when err is not a broker's error.
func kafkaCode(err error) int {
	switch e := err.(type) {
	case sarama.KError:
		return int(e)
	case *sarama.TopicError:
		return int(e.Err)
	case *sarama.TopicPartitionError:
		return int(e.Err)
	}
	return -1
}

// common holds the flags every subcommand takes.
type common struct {
	brokers string
	version string
	timeout time.Duration
}

func commonFlags(fs *flag.FlagSet) *common {
	c := &common{}
	fs.StringVar(&c.brokers, "brokers", "", "bootstrap broker HOST:PORT")
	fs.StringVar(&c.version, "version", "", "sarama.KafkaVersion, e.g. 0.8.2.0 or 2.2.0")
	fs.DurationVar(&c.timeout, "timeout", 20*time.Second, "bound on the whole run")
	return c
}

// parse parses the flags, starts the watchdog and returns Sarama's config for -version.
func (c *common) parse(fs *flag.FlagSet, args []string) *sarama.Config {
	if err := fs.Parse(args); err != nil {
		fatalf("%v", err)
	}
	if c.brokers == "" || c.version == "" {
		fatalf("-brokers and -version are required")
	}
	timeout := c.timeout
	time.AfterFunc(timeout, func() {
		fmt.Fprintf(os.Stderr, "sarama-client %s: error: timed out after %v\n", command, timeout)
		os.Exit(3)
	})
	v, err := sarama.ParseKafkaVersion(c.version)
	if err != nil {
		fatalf("-version %q: %v", c.version, err)
	}
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "ferrite-sarama-test"
	// Network waits far below the watchdog, so a silent broker shows as Sarama's own error.
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 15 * time.Second
	cfg.Net.WriteTimeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 5
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	cfg.Admin.Timeout = 5 * time.Second
	return cfg
}

func (c *common) brokerList() []string {
	return strings.Split(c.brokers, ",")
}

// ---------------------------------------------------------------------------------------------
// produce

func parseCodec(name string) sarama.CompressionCodec {
	switch name {
	case "none":
		return sarama.CompressionNone
	case "gzip":
		return sarama.CompressionGZIP
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	fatalf("unknown codec %q", name)
	return sarama.CompressionNone
}

// readMessages reads stdin: "key<TAB>value" is a keyed message, a line without a tab a keyless one.
func readMessages(topic string, partition int32, timestampBase int64) []*sarama.ProducerMessage {
	var msgs []*sarama.ProducerMessage
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		m := &sarama.ProducerMessage{Topic: topic, Partition: partition}
		line := scanner.Text()
		if i := strings.IndexByte(line, '\t'); i >= 0 {
			m.Key = sarama.StringEncoder(line[:i])
			line = line[i+1:]
		}
		m.Value = sarama.StringEncoder(line)
		if timestampBase > 0 {
			m.Timestamp = time.Unix(0, (timestampBase+int64(len(msgs)))*int64(time.Millisecond))
		}
		msgs = append(msgs, m)
	}
	if err := scanner.Err(); err != nil {
		fatalf("reading stdin: %v", err)
	}
	return msgs
}

// runProduce sends stdin's messages with one SyncProducer.SendMessages and prints each one's
// outcome: {"partition","offset","key","value"} or {"error","code","key","value"}. Exit 2 when
// any message failed (the lines say which and why).
func runProduce(args []string) {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	c := commonFlags(fs)
	topic := fs.String("topic", "", "topic")
	codec := fs.String("codec", "none", "none, gzip, snappy, lz4 or zstd")
	partition := fs.Int("partition", -1, "send every message to this partition (default: Sarama's hash partitioner)")
	timestamps := fs.Int64("timestamps", 0, "message i gets timestamp MS+i (default: Sarama's, the send time)")
	cfg := c.parse(fs, args)
	msgs := readMessages(*topic, int32(*partition), *timestamps)
	if len(msgs) == 0 {
		fatalf("no messages on stdin")
	}
	cfg.Producer.Compression = parseCodec(*codec)
	cfg.Producer.Return.Successes = true
	// Batch all messages together, so compressed sets hold many messages.
	cfg.Producer.Flush.Messages = len(msgs)
	cfg.Producer.Flush.Frequency = 100 * time.Millisecond
	// One request in flight per broker keeps each partition in order even across retries.
	cfg.Net.MaxOpenRequests = 1
	if *partition >= 0 {
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	}
	producer, err := sarama.NewSyncProducer(c.brokerList(), cfg)
	if err != nil {
		fatalf("new producer: %v", err)
	}
	failed := map[*sarama.ProducerMessage]error{}
	if err := producer.SendMessages(msgs); err != nil {
		perrs, ok := err.(sarama.ProducerErrors)
		if !ok {
			fatalf("send: %v", err)
		}
		for _, pe := range perrs {
			failed[pe.Msg] = pe.Err
		}
	}
	for _, m := range msgs {
		printProduced(m, failed[m])
	}
	if err := producer.Close(); err != nil {
		fatalf("close producer: %v", err)
	}
	if len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "sarama-client produce: error: %d of %d messages failed\n", len(failed), len(msgs))
		os.Exit(2)
	}
}

func encoderString(e sarama.Encoder) *string {
	if e == nil {
		return nil
	}
	b, _ := e.Encode()
	s := string(b)
	return &s
}

func printProduced(m *sarama.ProducerMessage, err error) {
	out := map[string]interface{}{"key": encoderString(m.Key), "value": encoderString(m.Value)}
	if err != nil {
		out["error"] = err.Error()
		out["code"] = kafkaCode(err)
	} else {
		out["partition"] = m.Partition
		out["offset"] = m.Offset
	}
	emit(out)
}

// ---------------------------------------------------------------------------------------------
// consume

func bytesOrNil(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// timestampMs is t in Unix milliseconds, or nil for no timestamp (magic 0 messages).
func timestampMs(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixNano() / int64(time.Millisecond)
	return &ms
}

func printMessage(m *sarama.ConsumerMessage) {
	emit(map[string]interface{}{
		"event":     "msg",
		"partition": m.Partition,
		"offset":    m.Offset,
		"key":       bytesOrNil(m.Key),
		"value":     string(m.Value),
		"timestamp": timestampMs(m.Timestamp),
	})
}

func parsePartitions(list string) []int32 {
	var out []int32
	for _, s := range strings.Split(list, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fatalf("partition %q: %v", s, err)
		}
		out = append(out, int32(p))
	}
	return out
}

func parseOffset(s string) int64 {
	switch s {
	case "oldest":
		return sarama.OffsetOldest
	case "newest":
		return sarama.OffsetNewest
	}
	o, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		fatalf("-offset %q: %v", s, err)
	}
	return o
}

// runConsume reads partitions with Sarama's Consumer (no group): prints {"event":"ready"} once
// every partition consumer has chosen its start, then each message, stopping -linger after
// the -count'th message (so extra, duplicated messages show up too).
func runConsume(args []string) {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	c := commonFlags(fs)
	topic := fs.String("topic", "", "topic")
	partitionList := fs.String("partitions", "", "comma-separated partitions (default: all)")
	offset := fs.String("offset", "oldest", "oldest, newest or an offset")
	count := fs.Int("count", 0, "messages to wait for")
	linger := fs.Duration("linger", 500*time.Millisecond, "how long to keep reading after -count")
	cfg := c.parse(fs, args)
	cfg.Consumer.Return.Errors = true
	client, err := sarama.NewClient(c.brokerList(), cfg)
	if err != nil {
		fatalf("new client: %v", err)
	}
	partitions := partitionsToRead(client, *topic, *partitionList)
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		fatalf("new consumer: %v", err)
	}
	messages := make(chan *sarama.ConsumerMessage)
	for _, p := range partitions {
		pc, err := consumer.ConsumePartition(*topic, p, parseOffset(*offset))
		if err != nil {
			fatalf("consume partition %d: %v", p, err)
		}
		go forward(pc, messages)
	}
	emit(map[string]string{"event": "ready"})
	readMessagesUntil(messages, *count, *linger)
	// No Close: the partition consumers may be mid-fetch, and exiting closes every socket.
}

func partitionsToRead(client sarama.Client, topic, list string) []int32 {
	if list != "" {
		return parsePartitions(list)
	}
	partitions, err := client.Partitions(topic)
	if err != nil {
		fatalf("partitions of %s: %v", topic, err)
	}
	return partitions
}

// forward hands a partition's messages on; any consumer error ends the run.
func forward(pc sarama.PartitionConsumer, out chan<- *sarama.ConsumerMessage) {
	go func() {
		for err := range pc.Errors() {
			fatalf("consuming %s/%d: %v", err.Topic, err.Partition, err.Err)
		}
	}()
	for m := range pc.Messages() {
		out <- m
	}
}

func readMessagesUntil(messages <-chan *sarama.ConsumerMessage, count int, linger time.Duration) {
	for got := 0; got < count; got++ {
		printMessage(<-messages)
	}
	done := time.After(linger)
	for {
		select {
		case m := <-messages:
			printMessage(m)
		case <-done:
			return
		}
	}
}

// ---------------------------------------------------------------------------------------------
// group-member

// member is a sarama.ConsumerGroupHandler that prints what it is given and marks each
// message it prints, up to limit (0: no limit); at the limit it ends the run.
type member struct {
	limit  int
	stop   context.CancelFunc
	lock   sync.Mutex
	marked int
}

func (h *member) Setup(s sarama.ConsumerGroupSession) error {
	claims := map[string][]int32{}
	for topic, partitions := range s.Claims() {
		claims[topic] = partitions
	}
	emit(map[string]interface{}{
		"event":      "assigned",
		"member":     s.MemberID(),
		"generation": s.GenerationID(),
		"claims":     claims,
	})
	return nil
}

func (h *member) Cleanup(s sarama.ConsumerGroupSession) error {
	emit(map[string]interface{}{"event": "released", "generation": s.GenerationID()})
	return nil
}

func (h *member) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.take(s, m)
	}
	return nil
}

// take prints and marks m unless the limit is already reached: what is printed is exactly
// what the final commit covers.
func (h *member) take(s sarama.ConsumerGroupSession, m *sarama.ConsumerMessage) {
	h.lock.Lock()
	defer h.lock.Unlock()
	if h.limit > 0 && h.marked >= h.limit {
		return
	}
	printMessage(m)
	s.MarkMessage(m, "")
	h.marked++
	if h.limit > 0 && h.marked == h.limit {
		h.stop()
	}
}

// runGroupMember is one member of a sarama.ConsumerGroup (from the oldest offset when the
// group has none committed). It runs until -limit messages are marked, or without -limit
// until stdin closes; then it leaves the group (committing what it marked) and prints the
// group's committed offsets for the topic, read back with OffsetFetch, as
// {"event":"committed","partition","offset"} lines.
func runGroupMember(args []string) {
	fs := flag.NewFlagSet("group-member", flag.ContinueOnError)
	c := commonFlags(fs)
	group := fs.String("group", "", "consumer group")
	topic := fs.String("topic", "", "topic")
	limit := fs.Int("limit", 0, "stop after marking this many messages (0: until stdin closes)")
	retention := fs.Duration("retention", 0, "Consumer.Offsets.Retention (non-zero: OffsetCommit v2 instead of v1)")
	cfg := c.parse(fs, args)
	groupConfig(cfg, *retention)
	cg, err := sarama.NewConsumerGroup(c.brokerList(), *group, cfg)
	if err != nil {
		fatalf("new consumer group: %v", err)
	}
	go func() {
		for err := range cg.Errors() {
			fatalf("group %s: %v", *group, err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	if *limit == 0 {
		go func() {
			// Stdin closing is the test's "stop now".
			_, _ = bufio.NewReader(os.Stdin).ReadString(0)
			cancel()
		}()
	}
	handler := &member{limit: *limit, stop: cancel}
	// Consume returns at every rebalance; join again until told to stop.
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{*topic}, handler); err != nil {
			fatalf("consume: %v", err)
		}
	}
	if err := cg.Close(); err != nil {
		fatalf("close consumer group: %v", err)
	}
	printCommitted(c, cfg, *group, *topic)
	emit(map[string]string{"event": "closed"})
}

// groupConfig shortens Sarama's group timings so rebalances take a second, not ten.
func groupConfig(cfg *sarama.Config, retention time.Duration) {
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	cfg.Consumer.Offsets.Retention = retention
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
}

func printCommitted(c *common, cfg *sarama.Config, group, topic string) {
	client, err := sarama.NewClient(c.brokerList(), cfg)
	if err != nil {
		fatalf("new client: %v", err)
	}
	defer client.Close()
	partitions, err := client.Partitions(topic)
	if err != nil {
		fatalf("partitions of %s: %v", topic, err)
	}
	resp := fetchOffsets(client, group, map[string][]int32{topic: partitions})
	for _, p := range partitions {
		block := resp.GetBlock(topic, p)
		if block == nil {
			fatalf("no committed offset in the answer for %s/%d", topic, p)
		}
		if block.Err != sarama.ErrNoError {
			fatalf("committed offset of %s/%d: %v", topic, p, block.Err)
		}
		emit(map[string]interface{}{"event": "committed", "partition": p, "offset": block.Offset})
	}
}

// fetchOffsets is OffsetFetch v1 to the group's coordinator, as Sarama's offset manager sends it.
func fetchOffsets(client sarama.Client, group string, partitions map[string][]int32) *sarama.OffsetFetchResponse {
	coordinator, err := client.Coordinator(group)
	if err != nil {
		fatalf("coordinator of %s: %v", group, err)
	}
	req := &sarama.OffsetFetchRequest{Version: 1, ConsumerGroup: group}
	for topic, ps := range partitions {
		for _, p := range ps {
			req.AddPartition(topic, p)
		}
	}
	resp, err := coordinator.FetchOffset(req)
	if err != nil {
		fatalf("offset fetch: %v", err)
	}
	return resp
}

// ---------------------------------------------------------------------------------------------
// admin

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type adminFlags struct {
	topics       stringList
	configs      stringList
	group        string
	partitions   int
	replication  int
	validateOnly bool
	partitionIDs string
	broker       string
}

// runAdmin runs one ClusterAdmin call (delete-group: Broker.DeleteGroups, which 1.22's
// ClusterAdmin does not wrap) and prints its result. A call that fails, or that answers a
// per-topic error, prints {"error","code"} and exits 1.
func runAdmin(op string, args []string) {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	c := commonFlags(fs)
	var a adminFlags
	fs.Var(&a.topics, "topic", "topic (repeatable)")
	fs.Var(&a.configs, "config", "topic config NAME=VALUE (repeatable)")
	fs.StringVar(&a.group, "group", "", "consumer group")
	fs.IntVar(&a.partitions, "partitions", 1, "partition count (create-topic, create-partitions)")
	fs.IntVar(&a.replication, "replication", 1, "replication factor (create-topic)")
	fs.BoolVar(&a.validateOnly, "validate-only", false, "validate only (create-topic)")
	fs.StringVar(&a.partitionIDs, "partition-ids", "", "partitions (list-group-offsets)")
	fs.StringVar(&a.broker, "broker", "", "broker resource name: an id, or empty for the cluster default")
	cfg := c.parse(fs, args)
	if op == "delete-group" {
		deleteGroup(c, cfg, a.group)
		return
	}
	admin, err := sarama.NewClusterAdmin(c.brokerList(), cfg)
	if err != nil {
		fatalf("new cluster admin: %v", err)
	}
	defer admin.Close()
	if err := adminOp(admin, op, &a); err != nil {
		emit(map[string]interface{}{"error": err.Error(), "code": kafkaCode(err)})
		admin.Close()
		fatalf("%v", err)
	}
}

func adminOp(admin sarama.ClusterAdmin, op string, a *adminFlags) error {
	switch op {
	case "create-topic":
		return createTopic(admin, a)
	case "list-topics":
		return listTopics(admin)
	case "describe-topics":
		return describeTopics(admin, a.topics)
	case "describe-config":
		return describeConfig(admin, a.topics)
	case "create-partitions":
		// Always a real growth: 1.22's ClusterAdmin drops the validateOnly argument.
		return admin.CreatePartitions(oneTopic(a), int32(a.partitions), nil, false)
	case "delete-topic":
		return admin.DeleteTopic(oneTopic(a))
	case "list-groups":
		return listGroups(admin)
	case "describe-groups":
		return describeGroups(admin, a.group)
	case "list-group-offsets":
		return listGroupOffsets(admin, a)
	case "delete-records":
		return deleteRecords(admin, a)
	case "describe-cluster":
		return describeCluster(admin)
	case "alter-config":
		return alterConfig(admin, a)
	case "alter-broker-config":
		return alterBrokerConfig(admin, a)
	case "describe-broker-config":
		return describeBrokerConfig(admin, a.broker)
	}
	fatalf("unknown admin operation %q", op)
	return nil
}

// deleteRecords moves log starts: -partition-ids "PARTITION=OFFSET,...". Sarama 1.22 sends
// DeleteRecords v0 to the controller and does not look at the per-partition errors.
func deleteRecords(admin sarama.ClusterAdmin, a *adminFlags) error {
	offsets := map[int32]int64{}
	for _, kv := range strings.Split(a.partitionIDs, ",") {
		parts := strings.SplitN(kv, "=", 2)
		if len(parts) != 2 {
			fatalf("-partition-ids %q is not PARTITION=OFFSET,...", a.partitionIDs)
		}
		p, err1 := strconv.Atoi(parts[0])
		o, err2 := strconv.ParseInt(parts[1], 10, 64)
		if err1 != nil || err2 != nil {
			fatalf("-partition-ids %q is not PARTITION=OFFSET,...", a.partitionIDs)
		}
		offsets[int32(p)] = o
	}
	if err := admin.DeleteRecords(oneTopic(a), offsets); err != nil {
		return err
	}
	emit(map[string]interface{}{"deleted": oneTopic(a)})
	return nil
}

// alterConfig replaces a topic's configs with the -config entries (AlterConfigs v0).
func alterConfig(admin sarama.ClusterAdmin, a *adminFlags) error {
	if err := admin.AlterConfig(sarama.TopicResource, oneTopic(a), configEntries(a), a.validateOnly); err != nil {
		return err
	}
	emit(map[string]interface{}{"altered": oneTopic(a)})
	return nil
}

// describeCluster prints each broker and the controller. Sarama 1.22's DescribeCluster asks
// the controller for Metadata (it predates the DescribeCluster API).
func describeCluster(admin sarama.ClusterAdmin) error {
	brokers, controller, err := admin.DescribeCluster()
	if err != nil {
		return err
	}
	for _, b := range brokers {
		emit(map[string]interface{}{"broker": b.ID(), "addr": b.Addr(), "controller": controller})
	}
	return nil
}

// brokerResource is Kafka's ConfigResource.Type BROKER. Sarama 1.22's BrokerResource is 5
// (its ACL resource numbering), which Kafka refuses as an unknown resource type.
const brokerResource = sarama.ConfigResourceType(4)

// alterBrokerConfig replaces a broker resource's dynamic configs (AlterConfigs v0, sent to the
// controller): -broker "" is the cluster default.
func alterBrokerConfig(admin sarama.ClusterAdmin, a *adminFlags) error {
	if err := admin.AlterConfig(brokerResource, a.broker, configEntries(a), a.validateOnly); err != nil {
		return err
	}
	emit(map[string]interface{}{"altered": a.broker})
	return nil
}

func describeBrokerConfig(admin sarama.ClusterAdmin, broker string) error {
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: brokerResource, Name: broker})
	if err != nil {
		return err
	}
	for _, e := range entries {
		emit(map[string]interface{}{"broker": broker, "name": e.Name, "value": e.Value,
			"default": e.Default, "read_only": e.ReadOnly})
	}
	return nil
}

func configEntries(a *adminFlags) map[string]*string {
	entries := map[string]*string{}
	for _, kv := range a.configs {
		i := strings.IndexByte(kv, '=')
		if i < 0 {
			fatalf("-config %q is not NAME=VALUE", kv)
		}
		value := kv[i+1:]
		entries[kv[:i]] = &value
	}
	return entries
}

func oneTopic(a *adminFlags) string {
	if len(a.topics) != 1 {
		fatalf("give exactly one -topic")
	}
	return a.topics[0]
}

func createTopic(admin sarama.ClusterAdmin, a *adminFlags) error {
	detail := &sarama.TopicDetail{
		NumPartitions:     int32(a.partitions),
		ReplicationFactor: int16(a.replication),
		ConfigEntries:     map[string]*string{},
	}
	for _, kv := range a.configs {
		i := strings.IndexByte(kv, '=')
		if i < 0 {
			fatalf("-config %q is not NAME=VALUE", kv)
		}
		value := kv[i+1:]
		detail.ConfigEntries[kv[:i]] = &value
	}
	return admin.CreateTopic(oneTopic(a), detail, a.validateOnly)
}

func listTopics(admin sarama.ClusterAdmin) error {
	topics, err := admin.ListTopics()
	if err != nil {
		return err
	}
	for name, d := range topics {
		configs := map[string]string{}
		for k, v := range d.ConfigEntries {
			configs[k] = *v
		}
		emit(map[string]interface{}{
			"topic":       name,
			"partitions":  d.NumPartitions,
			"replication": d.ReplicationFactor,
			"assignment":  d.ReplicaAssignment,
			"configs":     configs,
		})
	}
	return nil
}

func describeTopics(admin sarama.ClusterAdmin, topics []string) error {
	metadata, err := admin.DescribeTopics(topics)
	if err != nil {
		return err
	}
	for _, t := range metadata {
		var partitions []map[string]interface{}
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].ID < t.Partitions[j].ID })
		for _, p := range t.Partitions {
			partitions = append(partitions, map[string]interface{}{
				"id": p.ID, "error": int(p.Err), "leader": p.Leader, "replicas": p.Replicas, "isr": p.Isr,
			})
		}
		emit(map[string]interface{}{"topic": t.Name, "error": int(t.Err), "internal": t.IsInternal, "partitions": partitions})
	}
	return nil
}

func describeConfig(admin sarama.ClusterAdmin, topics []string) error {
	for _, topic := range topics {
		entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
		if err != nil {
			return err
		}
		for _, e := range entries {
			emit(map[string]interface{}{
				"topic": topic, "name": e.Name, "value": e.Value,
				"default": e.Default, "read_only": e.ReadOnly, "sensitive": e.Sensitive,
			})
		}
	}
	return nil
}

func listGroups(admin sarama.ClusterAdmin) error {
	groups, err := admin.ListConsumerGroups()
	if err != nil {
		return err
	}
	for name, protocolType := range groups {
		emit(map[string]string{"group": name, "protocol_type": protocolType})
	}
	return nil
}

func describeGroups(admin sarama.ClusterAdmin, group string) error {
	groups, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return err
	}
	for _, g := range groups {
		var members []map[string]interface{}
		for id, m := range g.Members {
			members = append(members, describeMember(id, m))
		}
		emit(map[string]interface{}{
			"group": g.GroupId, "error": int(g.Err), "state": g.State,
			"protocol_type": g.ProtocolType, "protocol": g.Protocol, "members": members,
		})
	}
	return nil
}

func describeMember(id string, m *sarama.GroupMemberDescription) map[string]interface{} {
	out := map[string]interface{}{"member_id": id, "client_id": m.ClientId, "client_host": m.ClientHost}
	if meta, err := m.GetMemberMetadata(); err != nil {
		out["metadata_error"] = err.Error()
	} else {
		out["subscribed"] = meta.Topics
	}
	if assignment, err := m.GetMemberAssignment(); err != nil {
		out["assignment_error"] = err.Error()
	} else {
		out["assignment"] = assignment.Topics
	}
	return out
}

func listGroupOffsets(admin sarama.ClusterAdmin, a *adminFlags) error {
	topic := oneTopic(a)
	resp, err := admin.ListConsumerGroupOffsets(a.group, map[string][]int32{topic: parsePartitions(a.partitionIDs)})
	if err != nil {
		return err
	}
	if resp.Err != sarama.ErrNoError {
		return resp.Err
	}
	for _, p := range parsePartitions(a.partitionIDs) {
		block := resp.GetBlock(topic, p)
		if block == nil {
			fatalf("no offset in the answer for %s/%d", topic, p)
		}
		emit(map[string]interface{}{
			"topic": topic, "partition": p, "offset": block.Offset,
			"metadata": block.Metadata, "error": int(block.Err),
		})
	}
	return nil
}

// deleteGroup sends DeleteGroups v0 to the group's coordinator and prints the group's error code.
func deleteGroup(c *common, cfg *sarama.Config, group string) {
	client, err := sarama.NewClient(c.brokerList(), cfg)
	if err != nil {
		fatalf("new client: %v", err)
	}
	defer client.Close()
	coordinator, err := client.Coordinator(group)
	if err != nil {
		fatalf("coordinator of %s: %v", group, err)
	}
	resp, err := coordinator.DeleteGroups(&sarama.DeleteGroupsRequest{Groups: []string{group}})
	if err != nil {
		fatalf("delete groups: %v", err)
	}
	code, ok := resp.GroupErrorCodes[group]
	if !ok {
		fatalf("no answer for group %s", group)
	}
	emit(map[string]interface{}{"group": group, "error": int(code)})
}
