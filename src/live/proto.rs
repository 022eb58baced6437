//! What a client may say, and the checks on it: the `topics` and
//! `communities` of a URL or a message become hub keys here, and nowhere
//! else.

use bytes::Bytes;
use serde::Deserialize;

use super::events::{Out, text_frame};
use super::hub::Key;
use super::subs::Membership;
use crate::model::CommunityName;

/// A client's JSON text message.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Subscribe {
        #[serde(default)]
        topics: Vec<i64>,
        #[serde(default)]
        communities: Vec<String>,
    },
    Unsubscribe {
        #[serde(default)]
        topics: Vec<i64>,
        #[serde(default)]
        communities: Vec<String>,
    },
    /// Authenticates the socket: it then also receives its user's inbox.
    Auth { token: String },
    /// Asks for `{"type":"pong"}`, for clients without WebSocket pings.
    /// A struct variant, braces and all: serde lets a unit variant of an
    /// internally tagged enum carry unknown fields.
    Ping {},
}

pub fn parse(text: &str) -> Result<Request, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// Hub keys for topic ids and community names, or what is wrong.
pub fn keys(topics: &[i64], communities: &[impl AsRef<str>]) -> Result<Vec<Key>, String> {
    let mut out = Vec::with_capacity(topics.len() + communities.len());
    for &t in topics {
        if t <= 0 {
            return Err(format!("{t} is not a topic id"));
        }
        out.push(Key::Topic(t));
    }
    for c in communities {
        let name = CommunityName::named(&c.as_ref().to_ascii_lowercase()).map_err(|e| format!("community: {e}"))?;
        out.push(Key::Community(name.into_inner().into_boxed_str()));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// `?topics=1,2&communities=a,b` as hub keys.
pub fn query_keys(topics: Option<&str>, communities: Option<&str>, max: usize) -> Result<Vec<Key>, String> {
    let split = |s: Option<&str>| -> Vec<String> {
        s.unwrap_or("").split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::to_owned).collect()
    };
    let (ts, cs) = (split(topics), split(communities));
    if ts.len() + cs.len() > max {
        return Err(format!("at most {max} subscriptions per connection"));
    }
    let ids = ts
        .iter()
        .map(|t| t.parse::<i64>().map_err(|_| format!("{t:?} is not a topic id")))
        .collect::<Result<Vec<_>, _>>()?;
    keys(&ids, &cs)
}

/// The `subscribed` reply listing what `m` now receives.
pub fn subscribed(m: &Membership) -> Option<Bytes> {
    let (mut topics, mut communities, mut inbox) = (Vec::new(), Vec::new(), false);
    for k in m.keys() {
        match k {
            Key::Topic(t) => topics.push(*t),
            Key::Community(c) => communities.push(&**c),
            Key::Inbox(_) => inbox = true,
        }
    }
    topics.sort_unstable();
    communities.sort_unstable();
    text_frame(&Out::Subscribed { topics, communities, inbox })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_becomes_sorted_unique_keys() {
        let keys = query_keys(Some("3, 1,3"), Some("Rust,rust"), 10).expect("keys");
        assert_eq!(keys.len(), 3);
        assert!(keys.contains(&Key::Topic(1)) && keys.contains(&Key::Topic(3)));
        assert!(keys.contains(&Key::Community("rust".into())));
    }

    #[test]
    fn bad_or_too_many_subscriptions_are_refused() {
        assert!(query_keys(Some("1,x"), None, 10).is_err());
        assert!(query_keys(Some("-4"), None, 10).is_err());
        assert!(query_keys(None, Some("no spaces"), 10).is_err());
        assert!(query_keys(Some("1,2,3"), None, 2).is_err());
    }

    #[test]
    fn messages_parse_and_unknown_ones_are_refused() {
        assert!(matches!(parse(r#"{"op":"subscribe","topics":[1]}"#), Ok(Request::Subscribe { .. })));
        assert!(matches!(parse(r#"{"op":"auth","token":"t"}"#), Ok(Request::Auth { .. })));
        assert!(parse(r#"{"op":"subscribe","topics":"1"}"#).is_err());
        assert!(parse(r#"{"op":"dance"}"#).is_err());
        assert!(parse("not json").is_err());
    }

    #[test]
    fn unknown_fields_are_refused_in_every_message() {
        assert!(matches!(parse(r#"{"op":"ping"}"#), Ok(Request::Ping {})));
        for m in [
            r#"{"op":"ping","x":1}"#,
            r#"{"op":"auth","token":"t","x":1}"#,
            r#"{"op":"subscribe","topics":[1],"x":1}"#,
            r#"{"op":"unsubscribe","topic":[1]}"#,
        ] {
            let e = parse(m).expect_err(m);
            assert!(e.starts_with("unknown field `"), "{m}: {e}");
        }
    }
}
