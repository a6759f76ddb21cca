//! Security: who a connection is and what it may do. SCRAM credentials, the SASL exchanges
//! that check them, TLS, principals, each listener's security as the broker starts it, and
//! the ACLs that decide what a principal may do.

pub mod acl;
pub mod listener;
pub mod plain_logins;
pub mod principal;
pub mod sasl;
pub mod scram;
pub mod tls;
