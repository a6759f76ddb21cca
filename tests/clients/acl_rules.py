"""ACLs through confluent-kafka's AdminClient, in force at once: a user without ACLs can do
nothing; Write lets it produce but not consume; Read plus Read on its group lets it consume;
PREFIXED and DENY; a super user needs none; only Alter on the cluster may change ACLs.

argv: bootstrap (a SASL_PLAINTEXT listener with SCRAM-SHA-256), then the super user's and the
plain user's names and passwords.
"""
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

bootstrap, admin_user, admin_password, user, password = sys.argv[1:6]
T = 20


def conf(name, secret):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": name, "sasl.password": secret}


admin = AdminClient(conf(admin_user, admin_password))
mine = AdminClient(conf(user, password))
for f in admin.create_topics([NewTopic(t, 1, 1) for t in ["orders", "logs-app", "logs-secret"]],
                             request_timeout=T).values():
    f.result(timeout=T)
for t in ["orders", "logs-app", "logs-secret"]:
    p = Producer({**conf(admin_user, admin_password)})
    p.produce(t, value=f"{t}-0".encode())
    assert p.flush(T) == 0


def produce(topic):
    """The delivery error code for one record (None: delivered)."""
    p = Producer({**conf(user, password), "message.timeout.ms": 5000})
    result = []
    p.produce(topic, value=b"x", on_delivery=lambda err, msg: result.append(err))
    p.flush(10)
    assert result, "no delivery report"
    return None if result[0] is None else result[0].code()


def consume(topic, group=None):
    """The first message's value, or the error code of the first error."""
    c = Consumer({**conf(user, password), "group.id": group or "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    if group:
        c.subscribe([topic])
    else:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.time() + 15
    try:
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                # An assigned consumer still looks up its group's coordinator, which a user
                # without Describe on the group is refused; the fetch's answer is what counts.
                if group is None and m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    continue
                return m.error().code()
            return m.value()
        return "timed out"
    finally:
        c.close()


def acl(resource, name, operation, permission=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL,
        principal=None):
    return AclBinding(resource, name, pattern, principal or f"User:{user}", "*", operation, permission)


def create(bindings):
    for f in admin.create_acls(bindings, request_timeout=T).values():
        f.result(timeout=T)


# Nothing allowed: no topic visible, no produce, no consume.
visible = mine.list_topics(timeout=T).topics
assert not visible, f"a user without ACLs saw {sorted(visible)}"
assert produce("orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED, "produced without ACLs"
print("no ACLs: nothing")

# Write: produce, not consume.
create([acl(ResourceType.TOPIC, "orders", AclOperation.WRITE)])
assert produce("orders") is None, "Write did not let it produce"
got = consume("orders")
assert got == KafkaError.TOPIC_AUTHORIZATION_FAILED, f"Write let it read: {got!r}"
assert sorted(mine.list_topics(timeout=T).topics) == ["orders"], "Write implies Describe"
print("Write: produce only")

# Read on the topic and the group: a group consumer reads.
create([acl(ResourceType.TOPIC, "orders", AclOperation.READ), acl(ResourceType.GROUP, "bobs", AclOperation.READ)])
assert consume("orders", group="bobs") == b"orders-0", "Read + group Read did not let it consume"
denied_group = consume("orders", group="others")
assert denied_group == KafkaError.GROUP_AUTHORIZATION_FAILED, denied_group
print("Read + group: consume")

# PREFIXED allows logs-*, a DENY on logs-secret wins.
create([acl(ResourceType.TOPIC, "logs-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, "logs-secret", AclOperation.READ, AclPermissionType.DENY)])
assert consume("logs-app") == b"logs-app-0", "PREFIXED Read"
assert consume("logs-secret") == KafkaError.TOPIC_AUTHORIZATION_FAILED, "DENY did not win"
print("PREFIXED and DENY")

# Describe and delete through the admin; the user may not change ACLs.
described = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY), request_timeout=T)
described = described.result(timeout=T)
assert len(described) == 5, described
try:
    attempt = mine.create_acls([acl(ResourceType.TOPIC, "*", AclOperation.ALL)], request_timeout=T)
    list(attempt.values())[0].result(timeout=T)
    raise AssertionError("a plain user created an ACL")
except KafkaException as e:
    assert e.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, e
deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                                              f"User:{user}", "*", AclOperation.WRITE, AclPermissionType.ANY)],
                            request_timeout=T)
matched = list(deleted.values())[0].result(timeout=T)
assert len(matched) == 1, matched
assert produce("orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED, "the deleted ACL still let it produce"
print("described, deleted, in force at once")
print("acl rules ok")
