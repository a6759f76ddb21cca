//! Security: SCRAM credentials today; SASL and ACLs build on them (issue 15).

pub mod scram;
