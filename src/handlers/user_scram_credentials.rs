//! DescribeUserScramCredentials (v0) and AlterUserScramCredentials (v0, KIP-554), as Kafka's
//! `ZkAdminManager` answers them. The client sends a salt and the salted password; the broker
//! keeps only the derived keys (`security::scram`).
//! - Describe: every user with a credential (sorted), or those asked, in request order; an
//!   empty name or an unknown user is RESOURCE_NOT_FOUND, a user asked twice
//!   DUPLICATE_RESOURCE.
//! - Alter, per user: an empty name or iterations outside 4096–16384 is
//!   UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, the same
//!   user and mechanism twice DUPLICATE_RESOURCE, deleting a credential that does not exist
//!   RESOURCE_NOT_FOUND; a user with any of these changes nothing. The others are written
//!   together (`controller::alter_scram_users`).

use super::{authorize, errors, Request, Response};
use crate::controller::{self, TopicError};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::security::scram::{self, Credential, Mechanism};
use crate::shard::routing::on_controller;
use crate::shard::Shard;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};

const EMPTY_NAME: &str = "Username must not be empty";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn handle_describe(
    shard: &Shard,
    req: &Request,
    body: DescribeUserScramCredentialsRequest,
) -> Response {
    // Kafka: Describe on the cluster.
    if !authorize::cluster(shard, req, Operation::Describe) {
        let denied = DescribeUserScramCredentialsResponse::default()
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
        return req.respond(ApiKey::DescribeUserScramCredentials, &denied);
    }
    let metadata = shard.metadata();
    let described = |user: &str| -> DescribeUserScramCredentialsResult {
        let infos = metadata.scram_users.get(user).map(|credentials| {
            credentials
                .iter()
                .filter_map(|(m, text)| {
                    let mechanism = Mechanism::from_name(m)?;
                    let iterations = Credential::from_kafka_string(text).ok()?.iterations;
                    Some(
                        CredentialInfo::default()
                            .with_mechanism(mechanism.code())
                            .with_iterations(iterations as i32),
                    )
                })
                .collect::<Vec<_>>()
        });
        let result = DescribeUserScramCredentialsResult::default().with_user(s(user));
        match infos {
            Some(infos) if !infos.is_empty() => result.with_credential_infos(infos),
            _ => refused(
                shard,
                result,
                ErrorCode::RESOURCE_NOT_FOUND,
                format!("Attempt to describe a user credential that does not exist: {user}"),
            ),
        }
    };
    let results = match body.users.filter(|u| !u.is_empty()) {
        None => metadata.scram_users.keys().map(|u| described(u)).collect(),
        Some(asked) => {
            let names: Vec<String> = asked.iter().map(|u| u.name.to_string()).collect();
            let mut seen = BTreeSet::new();
            names
                .iter()
                .filter(|n| seen.insert(n.as_str()))
                .map(|name| {
                    let result = DescribeUserScramCredentialsResult::default().with_user(s(name));
                    if name.is_empty() {
                        refused(shard, result, ErrorCode::RESOURCE_NOT_FOUND, EMPTY_NAME.into())
                    } else if names.iter().filter(|n| *n == name).count() > 1 {
                        let message = format!("Cannot describe SCRAM credentials for the same user twice in a single request: {name}");
                        refused(shard, result, ErrorCode::DUPLICATE_RESOURCE, message)
                    } else {
                        described(name)
                    }
                })
                .collect()
        }
    };
    req.respond(
        ApiKey::DescribeUserScramCredentials,
        &DescribeUserScramCredentialsResponse::default().with_results(results),
    )
}

fn refused(
    shard: &Shard,
    result: DescribeUserScramCredentialsResult,
    code: ErrorCode,
    message: String,
) -> DescribeUserScramCredentialsResult {
    errors::refused(shard, ApiKey::DescribeUserScramCredentials, code, &message);
    result
        .with_error_code(code.code())
        .with_error_message(Some(s(&message)))
}

/// Why one user's alterations are refused.
type Refusal = (ErrorCode, String);

/// An upsertion's or deletion's own fault, if any (Kafka's `illegalUpsertions` /
/// `illegalDeletions`).
fn illegal(name: &str, mechanism: i8, iterations: Option<i32>) -> Option<Refusal> {
    if name.is_empty() {
        return Some((ErrorCode::UNACCEPTABLE_CREDENTIAL, EMPTY_NAME.into()));
    }
    if Mechanism::from_code(mechanism).is_none() {
        return Some((
            ErrorCode::UNSUPPORTED_SASL_MECHANISM,
            "Unknown SCRAM mechanism".into(),
        ));
    }
    let i = iterations?;
    if i < scram::MIN_ITERATIONS as i32 {
        return Some((
            ErrorCode::UNACCEPTABLE_CREDENTIAL,
            "Too few iterations".into(),
        ));
    }
    if i > scram::MAX_ITERATIONS as i32 {
        return Some((
            ErrorCode::UNACCEPTABLE_CREDENTIAL,
            "Too many iterations".into(),
        ));
    }
    None
}

pub async fn handle_alter(
    shard: &Shard,
    req: &Request,
    body: AlterUserScramCredentialsRequest,
) -> Response {
    // Each user's fate: refused (and why) or its new set of credentials.
    let mut refusals: BTreeMap<String, Refusal> = BTreeMap::new();
    // Kafka: Alter on the cluster, else every user CLUSTER_AUTHORIZATION_FAILED.
    if !authorize::cluster(shard, req, Operation::Alter) {
        let denied = (
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.".to_string(),
        );
        let names = body.deletions.iter().map(|d| d.name.to_string());
        let names = names.chain(body.upsertions.iter().map(|u| u.name.to_string()));
        for name in names {
            refusals.insert(name, denied.clone());
        }
    }
    for d in &body.deletions {
        if let Some(r) = illegal(&d.name, d.mechanism, None) {
            refusals.entry(d.name.to_string()).or_insert(r);
        }
    }
    for u in &body.upsertions {
        if let Some(r) = illegal(&u.name, u.mechanism, Some(u.iterations)) {
            refusals.entry(u.name.to_string()).or_insert(r);
        }
    }
    let pairs: Vec<(String, i8)> = body
        .upsertions
        .iter()
        .map(|u| (u.name.to_string(), u.mechanism))
        .chain(
            body.deletions
                .iter()
                .map(|d| (d.name.to_string(), d.mechanism)),
        )
        .filter(|(name, _)| !refusals.contains_key(name))
        .collect();
    for (i, pair) in pairs.iter().enumerate() {
        if pairs[..i].contains(pair) {
            refusals.entry(pair.0.clone()).or_insert((
                ErrorCode::DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request".into(),
            ));
        }
    }
    let metadata = shard.metadata();
    let mut changed: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (name, _) in &pairs {
        if !refusals.contains_key(name) {
            let current = metadata.scram_users.get(name).cloned().unwrap_or_default();
            changed.entry(name.clone()).or_insert(current);
        }
    }
    for d in &body.deletions {
        let name = d.name.to_string();
        let Some(credentials) = changed.get_mut(&name) else {
            continue;
        };
        let mechanism = Mechanism::from_code(d.mechanism)
            .expect("checked above")
            .name();
        if credentials.remove(mechanism).is_none() {
            changed.remove(&name);
            refusals.insert(
                name,
                (
                    ErrorCode::RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist".into(),
                ),
            );
        }
    }
    for u in &body.upsertions {
        let Some(credentials) = changed.get_mut(u.name.as_str()) else {
            continue;
        };
        let mechanism = Mechanism::from_code(u.mechanism).expect("checked above");
        let credential = Credential::from_salted_password(
            mechanism,
            &u.salted_password,
            &u.salt,
            u.iterations as u32,
        );
        credentials.insert(mechanism.name().to_string(), credential.to_kafka_string());
    }
    let users: Vec<String> = changed.keys().cloned().collect();
    let written = if changed.is_empty() {
        Ok(())
    } else {
        on_controller(shard, move |s| async move {
            controller::alter_scram_users(&s, changed).await
        })
        .await
        .unwrap_or(Err(TopicError::Storage(
            "the controller did not answer".into(),
        )))
    };
    let mut results: Vec<AlterUserScramCredentialsResult> = refusals
        .into_iter()
        .map(|(user, (code, message))| {
            errors::refused(
                shard,
                ApiKey::AlterUserScramCredentials,
                code,
                &format_args!("{user}: {message}"),
            );
            AlterUserScramCredentialsResult::default()
                .with_user(s(&user))
                .with_error_code(code.code())
                .with_error_message(Some(s(&message)))
        })
        .collect();
    for user in users {
        let result = AlterUserScramCredentialsResult::default().with_user(s(&user));
        results.push(match &written {
            Ok(()) => result,
            Err(e) => result
                .with_error_code(e.code().code())
                .with_error_message(Some(s(&e.to_string()))),
        });
    }
    req.respond(
        ApiKey::AlterUserScramCredentials,
        &AlterUserScramCredentialsResponse::default().with_results(results),
    )
}
