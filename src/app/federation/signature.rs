//! HTTP Signatures as the Fediverse signs requests today: draft-cavage-12
//! with `rsa-sha256` (and `hs2019`, which names no algorithm and means the
//! same with an RSA key), over `(request-target) host date digest`, with
//! the body's SHA-256 in `Digest`. Parsing, the signing string, the
//! headers of an outbound request, and the checks of an inbound one.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use sha2::{Digest as _, Sha256};

/// How far a signed `Date` may be from now, either way: the window in
/// which a captured request could be replayed.
pub const DATE_WINDOW_SECS: i64 = 3600;

/// A `Signature` header, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader {
    pub key_id: String,
    /// `rsa-sha256`, `hs2019`, or absent.
    pub algorithm: Option<String>,
    /// The signed headers, lower-case, in order (default `date`).
    pub headers: Vec<String>,
    pub signature: Vec<u8>,
}

/// Why an inbound signature is refused (each answers 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the request is not signed (no Signature header)")]
    Unsigned,
    #[error("the Signature header does not parse: {0}")]
    Malformed(String),
    #[error("the signature must cover {0}")]
    Uncovered(&'static str),
    #[error("the signature's algorithm `{0}` is not rsa-sha256 or hs2019")]
    Algorithm(String),
    #[error("the Date header is missing, unreadable or more than an hour from now")]
    Stale,
    #[error("the Digest header does not match the body")]
    Digest,
    #[error("the signature does not verify with the key {0}")]
    Bad(String),
}

/// `Signature: keyId="...",algorithm="...",headers="...",signature="..."`.
pub fn parse(header: &str) -> Result<SignatureHeader, Refused> {
    let (mut key_id, mut algorithm, mut headers, mut signature) = (None, None, None, None);
    let mut rest = header.trim();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or_else(|| Refused::Malformed("a parameter has no value".into()))?;
        let name = rest[..eq].trim().to_ascii_lowercase();
        let after = rest[eq + 1..].trim_start();
        let value;
        if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').ok_or_else(|| Refused::Malformed("an unclosed quote".into()))?;
            value = &quoted[..end];
            rest = quoted[end + 1..].trim_start();
        } else {
            let end = after.find(',').unwrap_or(after.len());
            value = after[..end].trim();
            rest = &after[end..];
        }
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        match name.as_str() {
            "keyid" => key_id = Some(value.to_owned()),
            "algorithm" => algorithm = Some(value.to_ascii_lowercase()),
            "headers" => headers = Some(value.to_ascii_lowercase()),
            "signature" => {
                signature = Some(B64.decode(value).map_err(|_| Refused::Malformed("signature is not base64".into()))?)
            }
            _ => {}
        }
    }
    Ok(SignatureHeader {
        key_id: key_id.filter(|k| !k.is_empty()).ok_or_else(|| Refused::Malformed("no keyId".into()))?,
        algorithm,
        headers: headers.as_deref().unwrap_or("date").split_whitespace().map(str::to_owned).collect(),
        signature: signature.ok_or_else(|| Refused::Malformed("no signature".into()))?,
    })
}

/// The string signed: one `name: value` line per signed header, in order;
/// `(request-target)` is the lower-case method and the path with query.
/// `get` gives a header's value (several joined with `, `), `None` when
/// absent, which refuses the signature.
pub fn signing_string(
    headers: &[String],
    method: &str,
    path_and_query: &str,
    get: impl Fn(&str) -> Option<String>,
) -> Result<String, Refused> {
    let mut lines = Vec::with_capacity(headers.len());
    for name in headers {
        let value = match name.as_str() {
            "(request-target)" => format!("{} {path_and_query}", method.to_ascii_lowercase()),
            other => get(other).ok_or_else(|| Refused::Malformed(format!("signed header `{other}` is missing")))?,
        };
        lines.push(format!("{name}: {value}"));
    }
    Ok(lines.join("\n"))
}

/// The `Digest` header of a body.
pub fn digest(body: &[u8]) -> String {
    format!("SHA-256={}", B64.encode(Sha256::digest(body)))
}

/// Whether a `Digest` header names the body's SHA-256 (other algorithms
/// in the list are ignored; SHA-256 must be there).
pub fn digest_matches(header: &str, body: &[u8]) -> bool {
    let want = B64.encode(Sha256::digest(body));
    header.split(',').any(|part| {
        let part = part.trim();
        part.split_once('=').is_some_and(|(alg, value)| alg.eq_ignore_ascii_case("sha-256") && value == want)
    })
}

/// The checks that need no key: what must be signed, the algorithm, the
/// date's window and the digest. `date` and `digest` are the headers'
/// values; `now` in seconds.
pub fn check(
    sig: &SignatureHeader,
    date: Option<&str>,
    digest_header: Option<&str>,
    body: Option<&[u8]>,
    now: i64,
) -> Result<(), Refused> {
    if let Some(alg) = &sig.algorithm
        && alg != "rsa-sha256"
        && alg != "hs2019"
    {
        return Err(Refused::Algorithm(alg.clone()));
    }
    for needed in ["(request-target)", "host", "date"] {
        if !sig.headers.iter().any(|h| h == needed) {
            return Err(Refused::Uncovered(needed));
        }
    }
    let when = date.and_then(|d| httpdate::parse_http_date(d).ok()).ok_or(Refused::Stale)?;
    let when = when.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    if (when - now).abs() > DATE_WINDOW_SECS {
        return Err(Refused::Stale);
    }
    if let Some(body) = body {
        if !sig.headers.iter().any(|h| h == "digest") {
            return Err(Refused::Uncovered("digest"));
        }
        if !digest_header.is_some_and(|d| digest_matches(d, body)) {
            return Err(Refused::Digest);
        }
    }
    Ok(())
}

/// The headers that sign an outbound request: `Date`, `Digest` (with a
/// body) and `Signature`, by the key `key_id` (`private_pem`). `host` is
/// the URL's host with its port, as the request's Host header will carry.
pub fn sign_request(
    key_id: &str,
    private_pem: &str,
    method: &str,
    host: &str,
    path_and_query: &str,
    body: Option<&[u8]>,
) -> Result<Vec<(&'static str, String)>, String> {
    let key = super::keys::SigningKey::from_pem(private_pem)?;
    sign_request_with(key_id, &key, method, host, path_and_query, body)
}

/// `sign_request` with a key already read.
pub fn sign_request_with(
    key_id: &str,
    key: &super::keys::SigningKey,
    method: &str,
    host: &str,
    path_and_query: &str,
    body: Option<&[u8]>,
) -> Result<Vec<(&'static str, String)>, String> {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let mut names = vec!["(request-target)".to_owned(), "host".to_owned(), "date".to_owned()];
    let mut out = vec![("date", date.clone())];
    let digest_value = body.map(digest);
    if let Some(d) = &digest_value {
        names.push("digest".to_owned());
        out.push(("digest", d.clone()));
    }
    let text = signing_string(&names, method, path_and_query, |h| match h {
        "host" => Some(host.to_owned()),
        "date" => Some(date.clone()),
        "digest" => digest_value.clone(),
        _ => None,
    })
    .map_err(|e| e.to_string())?;
    let signature = key.sign(text.as_bytes())?;
    out.push((
        "signature",
        format!(
            "keyId=\"{key_id}\",algorithm=\"rsa-sha256\",headers=\"{}\",signature=\"{}\"",
            names.join(" "),
            B64.encode(signature)
        ),
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mastodon_style_signature_header_parses() {
        let h = parse(r#"keyId="https://a.example/users/x#main-key",algorithm="rsa-sha256",headers="(request-target) host date digest",signature="AAEC""#)
            .expect("parses");
        assert_eq!(h.key_id, "https://a.example/users/x#main-key");
        assert_eq!(h.algorithm.as_deref(), Some("rsa-sha256"));
        assert_eq!(h.headers, ["(request-target)", "host", "date", "digest"]);
        assert_eq!(h.signature, [0, 1, 2]);
    }

    #[test]
    fn a_header_without_key_or_signature_is_malformed() {
        assert!(matches!(parse(r#"signature="AAEC""#), Err(Refused::Malformed(_))));
        assert!(matches!(parse(r#"keyId="k""#), Err(Refused::Malformed(_))));
        assert!(matches!(parse(r#"keyId="k",signature="%%%""#), Err(Refused::Malformed(_))));
        assert!(matches!(parse("garbage"), Err(Refused::Malformed(_))));
    }

    #[test]
    fn the_digest_must_be_the_bodys_sha_256() {
        let d = digest(b"{}");
        assert!(digest_matches(&d, b"{}"));
        assert!(digest_matches(&format!("MD5=abc, {d}"), b"{}"));
        assert!(!digest_matches(&d, b"{ }"));
        assert!(!digest_matches("SHA-512=abc", b"{}"));
    }

    #[test]
    fn a_signed_request_verifies_and_a_changed_one_does_not() {
        let key = super::super::keys::generate().expect("key");
        let body = br#"{"type":"Follow"}"#;
        let headers =
            sign_request("k", &key.private_pem, "POST", "h.example:8080", "/ap/inbox", Some(body)).expect("signs");
        let get = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone());
        let sig = parse(&get("signature").expect("signature")).expect("parses");
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        check(&sig, get("date").as_deref(), get("digest").as_deref(), Some(body), now).expect("checks");
        let lookup = |h: &str| if h == "host" { Some("h.example:8080".to_owned()) } else { get(h) };
        let text = signing_string(&sig.headers, "POST", "/ap/inbox", lookup).expect("string");
        assert!(super::super::keys::verify(&key.public_pem, text.as_bytes(), &sig.signature));
        let other = signing_string(&sig.headers, "POST", "/ap/c/x/inbox", lookup).expect("string");
        assert!(!super::super::keys::verify(&key.public_pem, other.as_bytes(), &sig.signature));
        assert_eq!(
            check(&sig, get("date").as_deref(), get("digest").as_deref(), Some(b"{}"), now),
            Err(Refused::Digest)
        );
        assert_eq!(check(&sig, get("date").as_deref(), None, Some(body), now + 7200), Err(Refused::Stale));
    }

    #[test]
    fn a_signature_that_leaves_out_host_or_uses_hmac_is_refused() {
        let mut sig = SignatureHeader {
            key_id: "k".into(),
            algorithm: Some("hmac-sha256".into()),
            headers: vec!["(request-target)".into(), "host".into(), "date".into()],
            signature: vec![1],
        };
        assert_eq!(check(&sig, None, None, None, 0), Err(Refused::Algorithm("hmac-sha256".into())));
        sig.algorithm = Some("hs2019".into());
        sig.headers.retain(|h| h != "host");
        assert_eq!(check(&sig, None, None, None, 0), Err(Refused::Uncovered("host")));
    }
}
