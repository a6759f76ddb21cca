//! DescribeClientQuotas and AlterClientQuotas through the codec crate: none of the clients the
//! tests use offers them (kcat, confluent-kafka 2.16, kafka-python 3.0, Sarama 1.22).

use super::wire::{call, connect};
use super::Broker;
use kafka_protocol::messages::{
    alter_client_quotas_request, describe_client_quotas_request, AlterClientQuotasRequest,
    AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// An entity: (type, name; `None` is the default).
pub type Entity<'a> = &'a [(&'a str, Option<&'a str>)];

/// AlterClientQuotas of one entity: (key, value, remove) operations; the entry's error code.
pub fn alter(b: &Broker, entity: Entity, ops: &[(&str, f64, bool)], validate_only: bool) -> i16 {
    let mut conn = connect(b);
    let body = AlterClientQuotasRequest::default()
        .with_validate_only(validate_only)
        .with_entries(vec![alter_client_quotas_request::EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(t, n)| {
                        alter_client_quotas_request::EntityData::default()
                            .with_entity_type(s(t))
                            .with_entity_name(n.map(s))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(k, v, remove)| {
                        alter_client_quotas_request::OpData::default()
                            .with_key(s(k))
                            .with_value(*v)
                            .with_remove(*remove)
                    })
                    .collect(),
            )]);
    let answer: AlterClientQuotasResponse = call(&mut conn, ApiKey::AlterClientQuotas, 1, &body);
    answer.entries[0].error_code
}

/// A filter component: (entity type, match type 0 exact / 1 default / 2 any, match).
pub type Component<'a> = (&'a str, i8, Option<&'a str>);

/// What DescribeClientQuotas answers: the top-level error code, and each entity (its parts as
/// "type=name", "type=<default>") with its values.
pub fn describe(
    b: &Broker,
    components: &[Component],
    strict: bool,
) -> (i16, BTreeMap<Vec<String>, BTreeMap<String, f64>>) {
    let mut conn = connect(b);
    let body = DescribeClientQuotasRequest::default()
        .with_strict(strict)
        .with_components(
            components
                .iter()
                .map(|(t, m, name)| {
                    describe_client_quotas_request::ComponentData::default()
                        .with_entity_type(s(t))
                        .with_match_type(*m)
                        .with_match(name.map(s))
                })
                .collect(),
        );
    let answer: DescribeClientQuotasResponse =
        call(&mut conn, ApiKey::DescribeClientQuotas, 1, &body);
    let entries = answer
        .entries
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|p| {
                    format!(
                        "{}={}",
                        p.entity_type.as_str(),
                        p.entity_name.as_deref().unwrap_or("<default>")
                    )
                })
                .collect();
            let values = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (entity, values)
        })
        .collect();
    (answer.error_code, entries)
}
