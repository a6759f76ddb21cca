"""confluent-kafka and kafka-python over SASL_SSL (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN) and
over SSL with a client certificate, against one broker; a wrong password is refused.

argv: SASL_SSL address, SSL (mutual TLS) address, CA file, client certificate, client key.
"""
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KpTopicPartition
from kafka.errors import KafkaError

sasl_ssl, ssl, ca, cert, key = sys.argv[1:6]
T = 20


def sasl(mechanism, user, password):
    return {"bootstrap.servers": sasl_ssl, "security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": ca}


mutual_tls = {"bootstrap.servers": ssl, "security.protocol": "SSL", "ssl.ca.location": ca,
              "ssl.certificate.location": cert, "ssl.key.location": key}


def confluent_round_trip(conf, topic, values):
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=T).values():
        f.result(timeout=T)
    p = Producer({**conf, "message.timeout.ms": 20000})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(T) == 0, "unflushed"
    c = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.time() + T
    while len(got) < len(values):
        assert time.time() < deadline, f"{topic}: only {got}"
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append(m.value())
    c.close()
    assert got == values, (topic, got)


confluent_round_trip(sasl("SCRAM-SHA-512", "alice", "alice-secret"), "confluent-scram", [b"a", b"b"])
confluent_round_trip(sasl("PLAIN", "bob", "bob-secret"), "confluent-plain", [b"c"])
confluent_round_trip(mutual_tls, "confluent-mtls", [b"d", b"e", b"f"])

# A wrong password: the admin call fails with an authentication error.
bad = AdminClient(sasl("SCRAM-SHA-256", "alice", "not-it"))
try:
    bad.list_topics(timeout=5)
    raise AssertionError("a wrong password listed topics")
except KafkaException as e:
    assert "Authentication" in str(e) or "authentication" in str(e) or "_TRANSPORT" in str(e), e


def kafka_python(mechanism, user, password):
    return dict(bootstrap_servers=sasl_ssl, security_protocol="SASL_SSL", sasl_mechanism=mechanism,
                sasl_plain_username=user, sasl_plain_password=password, ssl_cafile=ca)


for mechanism, user, password, topic in [("SCRAM-SHA-256", "bob", "bob-secret", "kp-scram"),
                                         ("PLAIN", "alice", "alice-secret", "kp-plain")]:
    conf = kafka_python(mechanism, user, password)
    producer = KafkaProducer(**conf, request_timeout_ms=20000)
    for i in range(3):
        producer.send(topic, f"{mechanism}-{i}".encode()).get(timeout=T)
    producer.close()
    consumer = KafkaConsumer(**conf, consumer_timeout_ms=10000, auto_offset_reset="earliest")
    tp = KpTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [f"{mechanism}-{i}".encode() for i in range(3)], (mechanism, values)

try:
    KafkaProducer(**kafka_python("SCRAM-SHA-512", "alice", "wrong"), request_timeout_ms=5000,
                  max_block_ms=5000).send("kp-scram", b"x").get(timeout=10)
    raise AssertionError("kafka-python with a wrong password produced")
except KafkaError:
    pass

print("secure clients ok")
