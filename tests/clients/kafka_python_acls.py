"""ACLs through kafka-python 3's KafkaAdminClient (create_acls, describe_acls, delete_acls), a
second client family beside confluent-kafka's acl_rules.py: what it creates is in force at
once for a kafka-python consumer, what it deletes stops being so, and a user without Alter on
the cluster is refused.

argv: bootstrap (a SASL_PLAINTEXT listener with SCRAM-SHA-256), then the super user's and the
plain user's names and passwords.
"""
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         NewTopic, ResourcePattern, ResourcePatternFilter, ResourceType)
from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

bootstrap, admin_user, admin_password, user, password = sys.argv[1:6]
T = 20


def conf(name, secret):
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": name,
            "sasl_plain_password": secret, "request_timeout_ms": T * 1000}


admin = KafkaAdminClient(**conf(admin_user, admin_password))
admin.create_topics([NewTopic(t, 1, 1) for t in ["kp-open", "kp-secret"]])
producer = KafkaProducer(**conf(admin_user, admin_password))
for t in ["kp-open", "kp-secret"]:
    producer.send(t, value=t.encode(), partition=0).get(T)
producer.close(T)


def read(topic, wait=15):
    """The first value read as `user` from the start; the authorization error's name when the
    Fetch is refused; None when nothing came within `wait` seconds (kafka-python keeps asking
    for the metadata of a topic it may not Describe, without raising)."""
    consumer = KafkaConsumer(**conf(user, password), enable_auto_commit=False,
                             auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    deadline = time.time() + wait
    try:
        while time.time() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                return records[0].value.decode()
        return None
    except TopicAuthorizationFailedError:
        return "TopicAuthorizationFailed"
    finally:
        consumer.close()


bob = "User:" + user
prefixed = ResourcePattern(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)
secret = ResourcePattern(ResourceType.TOPIC, "kp-secret", ACLResourcePatternType.LITERAL)
allow = [ACL(bob, "*", op, ACLPermissionType.ALLOW, prefixed)
         for op in (ACLOperation.READ, ACLOperation.DESCRIBE)]
deny = ACL(bob, "*", ACLOperation.READ, ACLPermissionType.DENY, secret)

assert read("kp-open", wait=3) in (None, "TopicAuthorizationFailed"), "read without any ACL"
result = admin.create_acls(allow + [deny])
assert len(result["succeeded"]) == 3 and not result["failed"], result
assert read("kp-open") == "kp-open", "the PREFIXED allow is in force at once"
assert read("kp-secret") == "TopicAuthorizationFailed", "DENY wins"

# describe_acls with a filter: bob's ACLs on topics of any pattern.
mine = ACLFilter(bob, None, ACLOperation.ANY, ACLPermissionType.ANY,
                 ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY))
acls, error = admin.describe_acls(mine)
assert error.errno == 0, error
described = sorted((a.operation.name, a.permission_type.name, a.resource_pattern.resource_name,
                    a.resource_pattern.pattern_type.name) for a in acls)
assert described == [("DESCRIBE", "ALLOW", "kp-", "PREFIXED"), ("READ", "ALLOW", "kp-", "PREFIXED"),
                     ("READ", "DENY", "kp-secret", "LITERAL")], described

# The user may not change ACLs: CLUSTER_AUTHORIZATION_FAILED.
theirs = KafkaAdminClient(**conf(user, password))
refused = theirs.create_acls([ACL(bob, "*", ACLOperation.READ, ACLPermissionType.ALLOW, secret)])
assert len(refused["failed"]) == 1, refused
assert refused["failed"][0] is ClusterAuthorizationFailedError, refused
theirs.close()

# delete_acls: the PREFIXED allows go, and reading stops at once.
allows = ACLFilter(bob, None, ACLOperation.ANY, ACLPermissionType.ALLOW,
                   ResourcePatternFilter(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED))
[(_, deleted, error)] = admin.delete_acls([allows])
assert error.errno == 0 and len(deleted) == 2, (deleted, error)
assert read("kp-open", wait=3) in (None, "TopicAuthorizationFailed"), "a deleted ACL in force"
acls, _ = admin.describe_acls(mine)
assert [a.resource_pattern.resource_name for a in acls] == ["kp-secret"], acls
admin.close()
print("kafka-python acls ok")
