//! Topic-level configs: the log's own (`ferrite_shards::config::CONFIG_KEYS`) plus the few that
//! belong to the broker rather than the log. Every name and value is checked when a topic is
//! created; an unknown name is INVALID_CONFIG, as in Kafka.

use ferrite_shards::config::CONFIG_KEYS;
use ferrite_shards::LogConfig;

/// Topic configs that are not log settings, with what Ferrite accepts.
pub const BROKER_TOPIC_KEYS: &[(&str, &str)] = &[
    (
        "compression.type",
        "producer: batches are stored as the producer compressed them",
    ),
    (
        "min.insync.replicas",
        "replicas that must hold a batch before acks=all succeeds",
    ),
    (
        "unclean.leader.election.enable",
        "whether a replica outside the ISR may become leader",
    ),
];

/// Checks one `name=value` for a topic.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    if CONFIG_KEYS.iter().any(|k| k.name == name) {
        return LogConfig::default()
            .set(name, value)
            .map_err(|e| e.to_string());
    }
    match name {
        "compression.type" if value == "producer" => Ok(()),
        "compression.type" => Err(format!(
            "compression.type={value}: Ferrite stores batches as producers compressed them (compression.type=producer)"
        )),
        "min.insync.replicas" => match value.parse::<i32>() {
            Ok(n) if (1..=32767).contains(&n) => Ok(()),
            _ => Err(format!("min.insync.replicas={value}: expected an integer in [1, 32767]")),
        },
        "unclean.leader.election.enable" => match value {
            "true" | "false" => Ok(()),
            _ => Err(format!("unclean.leader.election.enable={value}: expected true or false")),
        },
        _ => Err(format!("Unknown topic config name: {name}")),
    }
}

/// Every topic config name, in DescribeConfigs order.
pub fn all_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = CONFIG_KEYS.iter().map(|k| k.name).collect();
    names.extend(BROKER_TOPIC_KEYS.iter().map(|(n, _)| *n));
    names.sort_unstable();
    names
}

/// The default of a topic config that is not a log setting.
pub fn broker_topic_default(name: &str, min_insync_replicas: i32) -> Option<String> {
    Some(match name {
        "compression.type" => "producer".into(),
        "min.insync.replicas" => min_insync_replicas.to_string(),
        "unclean.leader.election.enable" => "false".into(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_are_checked_and_unknown_refused() {
        assert!(validate("retention.ms", "1000").is_ok());
        assert!(validate("retention.ms", "soon").is_err());
        assert!(validate("cleanup.policy", "compact").is_ok());
        assert!(validate("min.insync.replicas", "2").is_ok());
        assert!(validate("compression.type", "gzip").is_err());
        assert!(validate("no.such.config", "1")
            .unwrap_err()
            .contains("Unknown topic config name"));
        assert!(all_names().contains(&"segment.bytes"));
    }
}
