"""kafka-python 3's describe_log_dirs against Ferrite: the data directory, every partition with
its size, and asking for some partitions only; then alter_configs (AlterConfigs) on a topic,
read back with describe_configs."""
import sys

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

bootstrap, data_dir = sys.argv[1], sys.argv[2]
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic("sized", 3, 1)])
p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
for i in range(30):
    p.send("sized", value=b"x" * 1000, partition=0)
p.flush()
p.close()

answers = admin.describe_log_dirs()
print(answers)
assert len(answers) == 1, answers
results = answers[0]["log_dirs"] if isinstance(answers[0], dict) and "log_dirs" in answers[0] else answers[0]["results"]
assert len(results) == 1, results
d = results[0]
assert d["error_code"] == 0, d
assert d["log_dir"] == data_dir, (d["log_dir"], data_dir)
topics = {t["name"]: {p["partition_index"]: p for p in t["partitions"]} for t in d["topics"]}
assert sorted(topics["sized"]) == [0, 1, 2], topics["sized"]
assert topics["sized"][0]["partition_size"] >= 30 * 1000, topics["sized"][0]
assert topics["sized"][1]["partition_size"] == 0
assert topics["sized"][0]["offset_lag"] == 0

some = admin.describe_log_dirs({"sized": [1]})
results = some[0]["log_dirs"] if "log_dirs" in some[0] else some[0]["results"]
names = [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in results[0]["topics"]]
assert names == [("sized", [1])], names
print("log dirs ok")

from kafka.admin import ConfigResource, ConfigResourceType
admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "sized", configs={"retention.ms": "123456"})])
described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "sized", ["retention.ms"])])
text = repr(described)
assert "123456" in text, text
print("alter configs ok")
