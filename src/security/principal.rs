//! Who a connection is: Kafka's `KafkaPrincipal`, `User:<name>`.
//!
//! PLAINTEXT and SSL without a client certificate are `User:ANONYMOUS`; SASL gives the
//! authenticated user name; a client certificate gives its subject's distinguished name in
//! RFC 2253 form (as Java's `X500Principal.getName()` writes it, which is what Kafka's ACLs and
//! `super.users` are written against), mapped by `ssl.principal.mapping.rules`
//! (`SslPrincipalMapper`: `RULE:pattern/replacement/[LU]`, ..., `DEFAULT`).

use regex::Regex;
use std::fmt;
use x509_parser::prelude::{FromDer, X509Certificate};

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    /// Always `User` today (Kafka's `KafkaPrincipal.USER_TYPE`).
    pub kind: String,
    pub name: String,
}

impl Principal {
    pub fn user(name: impl Into<String>) -> Principal {
        Principal {
            kind: "User".into(),
            name: name.into(),
        }
    }

    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// One `ssl.principal.mapping.rules` entry.
#[derive(Debug)]
enum Rule {
    Default,
    Map {
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

/// `ssl.principal.mapping.rules`, parsed once per listener.
#[derive(Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl PrincipalMapper {
    /// Kafka's `SslPrincipalMapper.fromRules`; the default is `DEFAULT` (the whole DN).
    pub fn parse(text: Option<&str>) -> Result<PrincipalMapper, String> {
        let text = text.unwrap_or("DEFAULT").trim();
        // Kafka's RULE_PARSER: a rule runs to the comma after its closing `/` and flags.
        let parser = Regex::new(
            r"\s*((DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)[^,]*|([^,]*))\s*(,|$)",
        )
        .expect("valid");
        let mut rules = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let Some(c) = parser.captures_at(text, at) else {
                break;
            };
            let whole = c.get(0).expect("match");
            if whole.start() != at || whole.as_str().is_empty() {
                return Err(format!(
                    "ssl.principal.mapping.rules: cannot parse {:?}",
                    &text[at..]
                ));
            }
            if c.get(2).is_some() {
                rules.push(Rule::Default);
            } else if let (Some(p), Some(r)) = (c.get(3), c.get(4)) {
                let pattern = Regex::new(&format!("^(?:{})$", p.as_str()))
                    .map_err(|e| format!("ssl.principal.mapping.rules: {e}"))?;
                rules.push(Rule::Map {
                    pattern,
                    replacement: java_replacement(r.as_str()),
                    case: c.get(5).and_then(|m| m.as_str().chars().next()),
                });
            } else {
                return Err(format!(
                    "ssl.principal.mapping.rules: {:?} is not DEFAULT or RULE:pattern/replacement/",
                    c.get(6).map_or("", |m| m.as_str())
                ));
            }
            at = whole.end();
        }
        Ok(PrincipalMapper { rules })
    }

    /// The principal name for `dn`, or `None` when no rule matches (Kafka then fails the
    /// authentication).
    pub fn map(&self, dn: &str) -> Option<String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Some(dn.to_string()),
                Rule::Map {
                    pattern,
                    replacement,
                    case,
                } => {
                    if pattern.is_match(dn) {
                        let out = pattern.replace_all(dn, replacement.as_str()).into_owned();
                        return Some(match case {
                            Some('L') => out.to_lowercase(),
                            Some('U') => out.to_uppercase(),
                            _ => out,
                        });
                    }
                }
            }
        }
        None
    }
}

/// Java's `$1` group references as the regex crate's `${1}` (so `$1x` stays group 1).
fn java_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    if n == '$' {
                        out.push_str("$$");
                    } else {
                        out.push(n);
                    }
                }
            }
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                out.push_str(&format!("${{{digits}}}"));
            }
            c => out.push(c),
        }
    }
    out
}

/// The subject of a DER certificate as RFC 2253 writes it: most specific RDN first, short
/// names for the usual attributes, special characters escaped.
pub fn subject_dn(der: &[u8]) -> Result<String, String> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| format!("client certificate: {e}"))?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let mut parts = Vec::new();
        for attr in rdn.iter() {
            let oid = attr.attr_type().to_id_string();
            let key = match oid.as_str() {
                "2.5.4.3" => "CN".to_string(),
                "2.5.4.6" => "C".to_string(),
                "2.5.4.7" => "L".to_string(),
                "2.5.4.8" => "ST".to_string(),
                "2.5.4.9" => "STREET".to_string(),
                "2.5.4.10" => "O".to_string(),
                "2.5.4.11" => "OU".to_string(),
                "0.9.2342.19200300.100.1.25" => "DC".to_string(),
                "0.9.2342.19200300.100.1.1" => "UID".to_string(),
                other => other.to_string(),
            };
            let value = match attr.as_str() {
                Ok(text) => escape_rfc2253(text),
                Err(_) => format!("#{}", hex(attr.attr_value().data)),
            };
            parts.push(format!("{key}={value}"));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn escape_rfc2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_rules_as_kafka_documents_them() {
        let m = PrincipalMapper::parse(Some(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
        ))
        .unwrap();
        assert_eq!(
            m.map("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US")
                .as_deref(),
            Some("kafka-server1")
        );
        assert_eq!(
            m.map("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa,ST=CA,C=US")
                .as_deref(),
            Some("duke@javasoft")
        );
        assert_eq!(m.map("cN=Admin.1,O=x").as_deref(), Some("admin.1"));
        assert_eq!(m.map("O=nothing").as_deref(), Some("O=nothing"));
        let strict = PrincipalMapper::parse(Some("RULE:^CN=(.*)$/$1/U")).unwrap();
        assert_eq!(strict.map("CN=bob").as_deref(), Some("BOB"));
        assert_eq!(strict.map("O=bob"), None);
        assert!(PrincipalMapper::parse(Some("NONSENSE")).is_err());
    }

    #[test]
    fn principals_print_as_acls_write_them() {
        assert_eq!(Principal::anonymous().to_string(), "User:ANONYMOUS");
        assert_eq!(Principal::user("CN=a,O=b").to_string(), "User:CN=a,O=b");
    }

    #[test]
    fn rfc_2253_escapes() {
        assert_eq!(escape_rfc2253("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape_rfc2253(" x "), "\\ x\\ ");
        assert_eq!(escape_rfc2253("#1"), "\\#1");
    }
}
