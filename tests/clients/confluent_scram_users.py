"""AlterUserScramCredentials and DescribeUserScramCredentials through confluent-kafka's
AdminClient: users made and described, the stored credential derived as RFC 5802 derives it
from the client's salted password (checked here with hashlib), Kafka's refusals, a deletion;
the second phase, after a restart, checks what was kept."""
import base64
import hashlib
import hmac
import json
import sys

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

bootstrap, data_dir, phase = sys.argv[1], sys.argv[2], sys.argv[3]
T = 20
admin = AdminClient({"bootstrap.servers": bootstrap})
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def alter(*alterations):
    """Each user's error code."""
    out = {}
    for user, f in admin.alter_user_scram_credentials(list(alterations), request_timeout=T).items():
        try:
            f.result(timeout=T)
            out[user] = KafkaError.NO_ERROR
        except KafkaException as e:
            out[user] = e.args[0].code()
    return out


def described(users=None):
    if users is None:
        got = admin.describe_user_scram_credentials(request_timeout=T).result(timeout=T)
    else:
        got = {u: f.result(timeout=T) for u, f in
               admin.describe_user_scram_credentials(users, request_timeout=T).items()}
    return {u: sorted((i.mechanism, i.iterations) for i in d.scram_credential_infos)
            for u, d in got.items()}


def upsert(user, mechanism, iterations, password=b"secret", salt=b"0123456789abcdef"):
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password, salt)


if phase == "alter":
    assert alter(upsert("alice", SHA256, 4096, b"alice-pw"), upsert("alice", SHA512, 8192),
                 upsert("bob", SHA512, 4096)) == {"alice": 0, "bob": 0}
    assert described() == {"alice": [(SHA256, 4096), (SHA512, 8192)], "bob": [(SHA512, 4096)]}

    # The stored keys are RFC 5802's, from the salted password the client sent.
    stored = json.load(open(f"{data_dir}/meta/users.json"))
    fields = dict(p.split("=", 1) for p in stored["alice"]["SCRAM-SHA-256"].split(","))
    salted = hashlib.pbkdf2_hmac("sha256", b"alice-pw", b"0123456789abcdef", 4096)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    assert base64.b64decode(fields["stored_key"]) == hashlib.sha256(client_key).digest(), fields
    assert base64.b64decode(fields["server_key"]) == hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    assert "alice-pw" not in json.dumps(stored)

    # Kafka's refusals, each changing nothing for that user.
    codes = alter(upsert("carol", SHA256, 1000), upsert("dave", SHA256, 20000),
                  UserScramCredentialDeletion("bob", SHA256))
    assert codes == {"carol": KafkaError.UNACCEPTABLE_CREDENTIAL,
                     "dave": KafkaError.UNACCEPTABLE_CREDENTIAL,
                     "bob": KafkaError.RESOURCE_NOT_FOUND}, codes
    codes = alter(upsert("erin", SHA256, 4096), upsert("erin", SHA256, 4096))
    assert codes == {"erin": KafkaError.DUPLICATE_RESOURCE}, codes
    try:
        described(["nobody"])
        raise AssertionError("an unknown user is RESOURCE_NOT_FOUND")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.RESOURCE_NOT_FOUND, e
    assert sorted(described()) == ["alice", "bob"]

    assert alter(UserScramCredentialDeletion("alice", SHA512)) == {"alice": 0}
    assert described(["alice"]) == {"alice": [(SHA256, 4096)]}
    print("scram users ok")
else:
    assert described() == {"alice": [(SHA256, 4096)], "bob": [(SHA512, 4096)]}
    print("scram users kept")
