//! The authorized-operations bit sets some responses carry when asked (KIP-430): one bit per
//! ACL operation code (READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
//! CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12). Without an
//! authorizer Kafka allows every operation a resource type supports
//! (`AclEntry.supportedOperations`), and so does Ferrite until ACLs exist. `NOT_REQUESTED`
//! (i32::MIN) is the schema's default when the client did not ask.

pub const NOT_REQUESTED: i32 = i32::MIN;

const fn bits(codes: &[u8]) -> i32 {
    let mut set = 0;
    let mut i = 0;
    while i < codes.len() {
        set |= 1 << codes[i];
        i += 1;
    }
    set
}

/// READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS.
pub const TOPIC: i32 = bits(&[3, 4, 5, 8, 6, 7, 10, 11]);
/// READ, DESCRIBE, DELETE.
pub const GROUP: i32 = bits(&[3, 8, 6]);
/// CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE.
pub const CLUSTER: i32 = bits(&[5, 9, 10, 11, 12, 7, 8]);

/// `set` when the client asked for it, else `NOT_REQUESTED`.
pub fn if_asked(asked: bool, set: i32) -> i32 {
    if asked {
        set
    } else {
        NOT_REQUESTED
    }
}
