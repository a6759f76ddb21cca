"""kafka-python 3's KafkaAdminClient against Ferrite, with a group of two KafkaConsumer
processes to administer, and KafkaProducer with every codec kafka-python has here.

Expectations are Kafka 3.9's. Each step runs even if an earlier one failed (a step that needs
an earlier one's result fails with it); each prints "STEP <name> ok" or "STEP <name> FAILED",
and the script ends with "kafka-python admin ok" only if every step passed.

Args: bootstrap. The broker runs with num.partitions=2. kafka-python 3.0.12 names the group
calls list_groups, describe_groups, list_group_offsets and delete_groups (the 2.x names
list_consumer_groups, ... are gone).
"""
import faulthandler
import os
import subprocess
import sys
import threading
import time
import traceback
import uuid

from members import Members, _die_with_parent

import kafka.errors as Errors
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka import codec as kcodec
import kafka.protocol.admin as PA
import kafka.protocol.consumer as PC
import kafka.protocol.metadata as PM
import kafka.protocol.producer as PP

# Every client call below has its own timeout; this bounds the whole script besides.
faulthandler.dump_traceback_later(40, exit=True)

HERE = os.path.dirname(os.path.abspath(__file__))
bootstrap = sys.argv[1]
T = 10000  # ms, for every request
failed = []


def step(name):
    def run(fn):
        started = time.time()
        try:
            fn()
            print(f"STEP {name} ok ({time.time() - started:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the next step runs
            failed.append(name)
            print(f"STEP {name} FAILED ({time.time() - started:.1f}s): {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
        return fn
    return run


def expect_error(error, fn, *args, **kwargs):
    try:
        got = fn(*args, **kwargs)
    except error:
        return
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"expected {error.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {error.__name__}, got a result: {got}")


def wait_for(what, check, timeout=10):
    deadline = time.time() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin", request_timeout_ms=T,
                         bootstrap_timeout_ms=T)

# What this client negotiated: the highest version both it and the broker have, per API.
versions = []
for mod in (PM, PA, PC, PP):
    for n in mod.__all__:
        cls = getattr(mod, n)
        if n.endswith("Request") and hasattr(cls, "API_KEY"):
            try:
                versions.append(f"{n[:-len('Request')]}=v{admin._manager.broker_version_data.api_version(cls)}")
            except Errors.IncompatibleBrokerVersion:
                pass
print(f"BROKER-VERSION {admin._manager.broker_version_data.broker_version_str} (inferred by kafka-python)")
print("VERSIONS " + " ".join(sorted(versions)), flush=True)

CONFIGS = {"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "2000000"}
# Kafka 3.9's defaults for topic configs a client commonly reads (the set ones above excluded).
# Not here yet, because Ferrite does not implement them (issue 14, configs): the topic configs
# file.delete.delay.ms, max.compaction.lag.ms, min.compaction.lag.ms, preallocate,
# segment.index.bytes and segment.jitter.ms, and the broker's offsets.retention.minutes.
TOPIC_DEFAULTS = {
    "compression.type": "producer", "delete.retention.ms": "86400000",
    "flush.messages": "9223372036854775807", "flush.ms": "9223372036854775807", "index.interval.bytes": "4096",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "9223372036854775807", "min.cleanable.dirty.ratio": "0.5",
    "min.insync.replicas": "1", "retention.bytes": "-1",
    "segment.bytes": "1073741824", "segment.ms": "604800000", "unclean.leader.election.enable": "false",
}
# ... and for broker configs.
BROKER_DEFAULTS = {
    "auto.create.topics.enable": "true", "default.replication.factor": "1", "delete.topic.enable": "true",
    "group.initial.rebalance.delay.ms": "3000", "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000", "log.retention.hours": "168", "log.retention.bytes": "-1",
    "log.segment.bytes": "1073741824", "message.max.bytes": "1048588", "min.insync.replicas": "1",
    "offsets.topic.num.partitions": "50", "offsets.topic.replication.factor": "3",
    "log.cleanup.policy": "delete", "compression.type": "producer",
}


@step("create_topics with configs")
def _():
    r = admin.create_topics({"kpa-conf": {"num_partitions": 3, "replication_factor": 1, "configs": CONFIGS}},
                            timeout_ms=T)
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("kpa-conf", 0)], r
    # v5+ (KIP-525): the answer carries the topic's partitions, replication and configs.
    t = r["topics"][0]
    assert t.get("num_partitions") == 3 and t.get("replication_factor") == 1, t
    configs = t.get("configs") or {}
    assert configs, f"no configs in the CreateTopics v5+ answer: {t}"
    for k, v in CONFIGS.items():
        assert configs.get(k, {}).get("value") == v, (k, configs.get(k))
        assert configs[k]["config_source"] == "DYNAMIC_TOPIC_CONFIG", (k, configs[k])
    assert configs.get("segment.bytes", {}).get("value") == "1073741824", configs.get("segment.bytes")


@step("create_topics with broker defaults (-1, -1) and wait_for_metadata")
def _():
    r = admin.create_topics({"kpa-defaults": {}}, timeout_ms=T, wait_for_metadata=True)
    assert r["topics"][0]["error_code"] == 0, r
    [t] = admin.describe_topics(["kpa-defaults"])
    assert len(t["partitions"]) == 2, "num.partitions=2 on the broker"


@step("create_topics validate_only")
def _():
    r = admin.create_topics({"kpa-dry": {"num_partitions": 4, "replication_factor": 1}}, timeout_ms=T,
                            validate_only=True)
    assert r["topics"][0]["error_code"] == 0, r
    assert r["topics"][0].get("num_partitions") == 4, r
    assert "kpa-dry" not in admin.list_topics(), "validate_only created the topic"
    # validate_only still refuses what a creation would refuse.
    expect_error(Errors.TopicAlreadyExistsError, admin.create_topics,
                 {"kpa-conf": {"num_partitions": 1, "replication_factor": 1}}, timeout_ms=T, validate_only=True)


@step("create_topics refusals")
def _():
    expect_error(Errors.TopicAlreadyExistsError, admin.create_topics,
                 {"kpa-conf": {"num_partitions": 3, "replication_factor": 1}}, timeout_ms=T)
    r = admin.create_topics({"kpa-conf": {"num_partitions": 1, "replication_factor": 1}}, timeout_ms=T,
                            raise_errors=False)
    assert r["topics"][0]["error_code"] == Errors.TopicAlreadyExistsError.errno, r
    for name, spec, error in [
        ("bad name!", {"num_partitions": 1, "replication_factor": 1}, Errors.InvalidTopicError),
        ("x" * 250, {"num_partitions": 1, "replication_factor": 1}, Errors.InvalidTopicError),
        ("kpa-zero", {"num_partitions": 0, "replication_factor": 1}, Errors.InvalidPartitionsError),
        ("kpa-rf", {"num_partitions": 1, "replication_factor": 3}, Errors.InvalidReplicationFactorError),
        ("kpa-cfg", {"num_partitions": 1, "replication_factor": 1, "configs": {"no.such.config": "1"}},
         Errors.InvalidConfigurationError),
    ]:
        try:
            expect_error(error, admin.create_topics, {name: spec}, timeout_ms=T)
        except AssertionError as e:
            raise AssertionError(f"{name[:20]}: {e}") from e


@step("list_topics")
def _():
    topics = set(admin.list_topics())
    assert {"kpa-conf", "kpa-defaults"} <= topics, topics
    assert not topics & {"kpa-dry", "bad name!", "kpa-zero", "kpa-rf", "kpa-cfg"}, topics


@step("describe_topics")
def _():
    [t] = admin.describe_topics(["kpa-conf"])
    assert t["name"] == "kpa-conf" and t["error_code"] == 0 and not t["is_internal"], t
    parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
    assert [p["partition_index"] for p in parts] == [0, 1, 2], parts
    for p in parts:
        assert p["error_code"] == 0 and p["leader_id"] == 0, p
        assert p["replica_nodes"] == [0] and p["isr_nodes"] == [0], p
    names = {t["name"] for t in admin.describe_topics()}
    assert {"kpa-conf", "kpa-defaults"} <= names, names
    [missing] = admin.describe_topics(["kpa-missing"])
    assert missing["error_code"] == Errors.UnknownTopicOrPartitionError.errno, missing
    assert "kpa-missing" not in admin.list_topics(), "describing must not create the topic"


@step("describe_topics by topic id")
def _():
    [t] = admin.describe_topics(["kpa-conf"])
    topic_id = uuid.UUID(str(t.get("topic_id")))
    assert topic_id.int != 0, f"a topic id (Kafka 2.8+): {topic_id}"
    described = admin.describe_topics([topic_id])
    assert len(described) == 1, f"Metadata v12 by topic id {topic_id}: {described}"
    [by_id] = described
    assert by_id["name"] == "kpa-conf" and by_id["error_code"] == 0, by_id
    assert uuid.UUID(str(by_id["topic_id"])) == topic_id, by_id
    [other] = admin.describe_topics(["kpa-defaults"])
    assert uuid.UUID(str(other["topic_id"])) != topic_id, "each topic its own id"
    [unknown] = admin.describe_topics([uuid.uuid4()])
    assert unknown["error_code"] == Errors.UnknownTopicIdError.errno, unknown


@step("describe_configs of a topic: what was set")
def _():
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa-conf")])
    got = modified["topic"]["kpa-conf"]
    assert set(got) == set(CONFIGS), f"only what was set is modified: {sorted(got)}"
    for k, v in CONFIGS.items():
        assert got[k]["value"] == v, (k, got[k])
        assert got[k]["config_source"] == "DYNAMIC_TOPIC_CONFIG", (k, got[k])
    only = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa-conf", ["retention.ms"])],
                                  config_filter="all")["topic"]["kpa-conf"]
    assert list(only) == ["retention.ms"] and only["retention.ms"]["value"] == "3600000", only
    with_synonyms = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa-conf", ["retention.ms"])],
                                           include_synonyms=True, config_filter="all")["topic"]["kpa-conf"]
    synonyms = with_synonyms["retention.ms"]["synonyms"]
    assert synonyms and synonyms[0]["source"] == "DYNAMIC_TOPIC_CONFIG", with_synonyms
    assert synonyms[0]["value"] == "3600000", synonyms


@step("describe_configs of a topic: Kafka's defaults")
def _():
    every = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa-conf")],
                                   config_filter="all")["topic"]["kpa-conf"]
    wrong = {k: every.get(k, {}).get("value") for k, v in TOPIC_DEFAULTS.items()
             if every.get(k, {}).get("value") != v or every[k]["config_source"] != "DEFAULT_CONFIG"}
    assert not wrong, f"Kafka 3.9's topic defaults, these missing or different: {wrong}"


@step("describe_configs of the broker: what was set")
def _():
    every = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                   config_filter="all")["broker"]["0"]
    assert every["num.partitions"]["value"] == "2", every["num.partitions"]
    assert every["num.partitions"]["config_source"] == "STATIC_BROKER_CONFIG", every["num.partitions"]
    # Set at startup is static (kafka-python's "modified" filter keeps dynamic ones only).
    static = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                    config_filter="static")["broker"]["0"]
    assert "num.partitions" in static and "log.segment.bytes" not in static, sorted(static)
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")])["broker"]["0"]
    assert modified == {}, f"no dynamic broker configs: {sorted(modified)}"
    only = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0", ["num.partitions"])],
                                  config_filter="all")["broker"]["0"]
    assert list(only) == ["num.partitions"], only


@step("describe_configs of the broker: Kafka's defaults")
def _():
    every = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                   config_filter="all")["broker"]["0"]
    wrong = {k: every.get(k, {}).get("value") for k, v in BROKER_DEFAULTS.items()
             if every.get(k, {}).get("value") != v or every[k]["config_source"] != "DEFAULT_CONFIG"}
    assert not wrong, f"Kafka 3.9's broker defaults, these missing or different: {wrong}"


@step("create_partitions")
def _():
    admin.create_partitions({"kpa-conf": 5}, timeout_ms=T)
    [t] = admin.describe_topics(["kpa-conf"])
    assert sorted(p["partition_index"] for p in t["partitions"]) == [0, 1, 2, 3, 4], t
    admin.create_partitions({"kpa-conf": 8}, timeout_ms=T, validate_only=True)
    [t] = admin.describe_topics(["kpa-conf"])
    assert len(t["partitions"]) == 5, "validate_only added partitions"
    expect_error(Errors.InvalidPartitionsError, admin.create_partitions, {"kpa-conf": 2}, timeout_ms=T)
    expect_error(Errors.InvalidPartitionsError, admin.create_partitions, {"kpa-conf": 5}, timeout_ms=T)
    expect_error(Errors.UnknownTopicOrPartitionError, admin.create_partitions, {"kpa-missing": 4}, timeout_ms=T)


# --- KafkaProducer with every codec, read back by an assigned consumer ----------------------

# gzip is always there; the others need python-snappy, lz4 and zstandard (scripts/test
# installs them): a missing one fails, it is not skipped.
CODECS = {"gzip": kcodec.has_gzip(), "snappy": kcodec.has_snappy(), "lz4": kcodec.has_lz4(),
          "zstd": kcodec.has_zstd()}


@step("codecs installed")
def _():
    missing = [c for c, ok in CODECS.items() if not ok]
    assert not missing, f"kafka-python has no {missing} here: pip install python-snappy lz4 zstandard"


for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
    @step(f"produce and consume {codec}")
    def _(codec=codec):
        topic = f"kpa-codec-{codec}"
        producer = KafkaProducer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=T, request_timeout_ms=T,
                                 max_block_ms=T, linger_ms=20,
                                 compression_type=None if codec == "none" else codec)
        sent = []
        for i in range(60):
            # Values repeat a pattern, so each batch compresses (kafka-python sends a batch
            # uncompressed when compressing would not make it smaller).
            value = (f"{codec}-{i}-" + "abcdefghij" * (10 + i % 7 * 40)).encode()
            key = None if i % 10 == 3 else f"key-{i}".encode()
            headers = [] if i % 5 == 0 else [("i", str(i).encode()), ("codec", codec.encode()), ("dup", b"1"),
                                             ("dup", b"2")]
            sent.append((key, value, headers, producer.send(topic, key=key, value=value, headers=headers,
                                                            partition=i % 2, timestamp_ms=1750000000000 + i)))
        producer.flush(timeout=10)
        metas = [f.get(timeout=10) for _, _, _, f in sent]
        producer.close(timeout=10)
        for p in (0, 1):
            offsets = [m.offset for m in metas if m.partition == p]
            assert offsets == list(range(30)), f"partition {p}: {offsets}"
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=T, request_timeout_ms=T,
                                 enable_auto_commit=False)
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.seek_to_beginning()
        got = []
        deadline = time.time() + 10
        while len(got) < 60 and time.time() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        ends = consumer.end_offsets([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout_ms=T)
        consumer.close(timeout_ms=T)
        assert len(got) == 60, f"read {len(got)} of 60"
        assert ends == {TopicPartition(topic, 0): 30, TopicPartition(topic, 1): 30}, ends
        by_pos = {(r.partition, r.offset): r for r in got}
        for (key, value, headers, _), m in zip(sent, metas):
            r = by_pos[(m.partition, m.offset)]
            assert (r.key, r.value) == (key, value), f"offset {m.offset}: {r.key} {r.value[:30]}"
            assert list(r.headers) == headers, f"offset {m.offset}: headers {r.headers} != {headers}"
            assert r.timestamp == m.timestamp == 1750000000000 + (m.offset * 2 + m.partition), r


# --- A group of two KafkaConsumer processes, one killed and restarted ------------------------

GTOPIC, GROUP, GPARTS = "kpa-group", "kpa-g", 4


class PythonMembers(Members):
    """members.py's harness, running kafka_python_member.py instead of group_member.py."""

    def start(self, name, group, instance=None):
        args = [sys.executable, os.path.join(HERE, "kafka_python_member.py"), self.bootstrap, group, self.topic,
                name]
        p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             preexec_fn=_die_with_parent)
        self.procs[name] = p
        with self.lock:
            self.assigned[name] = set()
        threading.Thread(target=self._follow, args=(name, p), daemon=True).start()


members = PythonMembers(bootstrap, GTOPIC)
group_producer = None
state = {}


def produce_numbered(start, end):
    futures = [group_producer.send(GTOPIC, value=f"g{i}".encode(), partition=i % GPARTS) for i in range(start, end)]
    group_producer.flush(timeout=10)
    for f in futures:
        f.get(timeout=10)


def describe_group():
    return admin.describe_groups([GROUP])[GROUP]


@step("group: two members split the partitions and read everything")
def _():
    global group_producer
    admin.create_topics({GTOPIC: {"num_partitions": GPARTS, "replication_factor": 1}}, timeout_ms=T)
    group_producer = KafkaProducer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=T, request_timeout_ms=T,
                                   max_block_ms=T)
    produce_numbered(0, 200)
    members.start("one", GROUP)
    members.start("two", GROUP)
    split = members.wait_split(["one", "two"], GPARTS, timeout=20)
    state["split"] = split
    members.wait_until("all 200 records", lambda a, r: len(r) >= 200, timeout=15)
    _, records = members.snapshot()
    got = sorted((p, o) for _, p, o, _ in records)
    assert got == sorted((i % GPARTS, i // GPARTS) for i in range(200)), f"{len(got)} records"
    for name, p, _, _ in records:
        assert p in split[name], f"{name} read partition {p} it does not hold: {split}"


@step("list_groups")
def _():
    groups = {g["group_id"]: g for g in admin.list_groups()}
    assert GROUP in groups, groups
    assert groups[GROUP]["protocol_type"] == "consumer", groups[GROUP]
    assert groups[GROUP].get("group_state") == "Stable", groups[GROUP]
    stable = {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
    assert GROUP in stable, stable
    empty = {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}
    assert GROUP not in empty, empty


@step("describe_groups")
def _():
    g = describe_group()
    assert g["error"] is None, g
    assert g["group_state"] == "Stable" and g["protocol_type"] == "consumer", g
    assert g["protocol_data"] in ("range", "roundrobin"), g["protocol_data"]
    by_client = {m["client_id"]: m for m in g["members"]}
    assert set(by_client) == {"one", "two"}, by_client
    for name, m in by_client.items():
        assert m["client_host"].startswith("/127.0.0.1"), m["client_host"]
        assert GTOPIC in m["member_metadata"]["topics"], m["member_metadata"]
        parts = {p for t in m["member_assignment"]["assigned_partitions"] if t["topic"] == GTOPIC
                 for p in t["partitions"]}
        assert parts == state["split"][name], f"{name}: described {parts}, holds {state['split'][name]}"
    missing = admin.describe_groups(["kpa-no-such-group"])["kpa-no-such-group"]
    assert missing["group_state"] == "Dead" and missing["members"] == [], missing


@step("list_group_offsets")
def _():
    offsets = admin.list_group_offsets(GROUP)[GROUP]
    want = {TopicPartition(GTOPIC, p): 50 for p in range(GPARTS)}
    assert {tp: o.offset for tp, o in offsets.items()} == want, offsets
    owner = {p: n for n, ps in state["split"].items() for p in ps}
    for tp, o in offsets.items():
        assert o.metadata == owner[tp.partition], f"{tp}: metadata {o.metadata!r}, committed by {owner[tp.partition]}"
    some = admin.list_group_offsets({GROUP: [TopicPartition(GTOPIC, 1)]})[GROUP]
    assert {tp: o.offset for tp, o in some.items()} == {TopicPartition(GTOPIC, 1): 50}, some


@step("delete_groups refuses a group with members")
def _():
    assert admin.delete_groups([GROUP]) == {GROUP: "NonEmptyGroupError"}


@step("group: a killed member restarted in a new process resumes at the committed offsets")
def _():
    before = len(members.snapshot()[1])
    members.kill("one")
    members.start("one", GROUP)  # a new process: a new member id, the same client id
    members.wait_split(["one", "two"], GPARTS, timeout=20)
    produce_numbered(200, 240)
    members.wait_until("the 40 new records", lambda a, r: len(r) >= before + 40, timeout=15)
    time.sleep(0.5)  # a record read twice would show now
    assigned, records = members.snapshot()
    later = records[before:]
    got = sorted((p, o) for _, p, o, _ in later)
    assert got == sorted((i % GPARTS, i // GPARTS) for i in range(200, 240)), \
        f"after the restart: {got} (earlier records read again, or new ones missing)"
    for p in assigned["one"]:
        first = min(o for n, q, o, _ in later if n == "one" and q == p)
        assert first == 50, f"the restarted member began partition {p} at {first}, committed 50"
    offsets = admin.list_group_offsets(GROUP)[GROUP]
    assert {tp.partition: o.offset for tp, o in offsets.items()} == {p: 60 for p in range(GPARTS)}, offsets


@step("group: both members leave; the group is Empty")
def _():
    members.close("one")
    members.close("two")
    g = wait_for("the group to be Empty", lambda: (lambda g: g if g["group_state"] == "Empty" else None)(
        describe_group()))
    assert g["members"] == [] and g["protocol_type"] == "consumer", g
    empty = {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}
    assert GROUP in empty, empty


@step("alter_group_offsets on the empty group")
def _():
    r = admin.alter_group_offsets(GROUP, {TopicPartition(GTOPIC, 0): OffsetAndMetadata(7, "reset", -1)})
    assert r == {TopicPartition(GTOPIC, 0): Errors.NoError}, r
    offsets = admin.list_group_offsets(GROUP)[GROUP]
    assert offsets[TopicPartition(GTOPIC, 0)].offset == 7, offsets
    assert offsets[TopicPartition(GTOPIC, 0)].metadata == "reset", offsets
    assert offsets[TopicPartition(GTOPIC, 1)].offset == 60, offsets


@step("delete_groups")
def _():
    assert admin.delete_groups([GROUP]) == {GROUP: "OK"}
    assert GROUP not in {g["group_id"] for g in admin.list_groups()}
    g = describe_group()
    assert g["group_state"] == "Dead", g
    assert admin.list_group_offsets(GROUP)[GROUP] == {}, "the deleted group's offsets are gone"
    assert admin.delete_groups([GROUP]) == {GROUP: "GroupIdNotFoundError"}


@step("delete_topics")
def _():
    r = admin.delete_topics(["kpa-conf", "kpa-defaults"], timeout_ms=T)
    assert sorted((t["name"], t["error_code"]) for t in r["topics"]) == [("kpa-conf", 0), ("kpa-defaults", 0)], r
    wait_for("the topics to go", lambda: not {"kpa-conf", "kpa-defaults"} & set(admin.list_topics()))
    expect_error(Errors.UnknownTopicOrPartitionError, admin.delete_topics, ["kpa-conf"], timeout_ms=T)
    r = admin.delete_topics(["kpa-defaults"], timeout_ms=T, raise_errors=False)
    assert r["topics"][0]["error_code"] == Errors.UnknownTopicOrPartitionError.errno, r


members.stop_all()
if group_producer is not None:
    group_producer.close(timeout=10)
admin.close()
if failed:
    print(f"FAILED STEPS: {failed}")
    sys.exit(1)
print("kafka-python admin ok")
