//! Security: who a connection is and what it may do. SCRAM credentials, the SASL exchanges
//! that check them, TLS, principals, and each listener's security as the broker starts it.

pub mod listener;
pub mod principal;
pub mod sasl;
pub mod scram;
pub mod tls;
