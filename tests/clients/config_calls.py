"""The confluent-kafka AdminClient calls the config tests share: describe one resource, and
IncrementalAlterConfigs of one resource answered with its error code."""
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

T = 20


def describe(admin, resource):
    return list(admin.describe_configs([resource], request_timeout=T).values())[0].result(timeout=T)


def incremental(admin, resource, *entries, validate_only=False):
    r = ConfigResource(resource.restype, resource.name, incremental_configs=list(entries))
    try:
        list(admin.incremental_alter_configs([r], validate_only=validate_only,
                                             request_timeout=T).values())[0].result(timeout=T)
    except KafkaException as e:
        return e.args[0].code()
    return KafkaError.NO_ERROR


def op(name, value, kind=AlterConfigOpType.SET):
    return ConfigEntry(name, value, incremental_operation=kind)
