//! What nodes send each other: one JSON object per message, tagged with
//! the sender's node id so a node can skip its own.

use serde::{Deserialize, Serialize};

use crate::live::Key;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Msg {
    /// Drop every cached rendering of this topic.
    Invalidate { topic: i64 },
    /// A live event: the JSON the sender's subscribers got, for this key.
    Event { key: WireKey, payload: String },
    /// Drop the whole cache: the sender may have lost invalidations.
    Flush,
    /// PostgreSQL only: a message too big for NOTIFY, stored under this id
    /// in `pith_bus_spill`.
    Spilled { id: i64 },
}

/// `live::Key` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireKey {
    Topic(i64),
    Community(String),
    Inbox(i64),
}

impl From<&Key> for WireKey {
    fn from(k: &Key) -> WireKey {
        match k {
            Key::Topic(id) => WireKey::Topic(*id),
            Key::Community(name) => WireKey::Community(name.to_string()),
            Key::Inbox(id) => WireKey::Inbox(*id),
        }
    }
}

impl From<WireKey> for Key {
    fn from(k: WireKey) -> Key {
        match k {
            WireKey::Topic(id) => Key::Topic(id),
            WireKey::Community(name) => Key::Community(name.into()),
            WireKey::Inbox(id) => Key::Inbox(id),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The sending node's id.
    pub node: String,
    #[serde(flatten)]
    pub msg: Msg,
}

impl Envelope {
    pub fn encode(&self) -> String {
        // A struct of strings and integers always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn decode(text: &[u8]) -> Option<Envelope> {
        serde_json::from_slice(text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips_through_json() {
        let msgs = [
            Msg::Invalidate { topic: 7 },
            Msg::Event { key: WireKey::Community("rust".into()), payload: r#"{"type":"topic"}"#.into() },
            Msg::Event { key: WireKey::Inbox(3), payload: "{}".into() },
            Msg::Flush,
            Msg::Spilled { id: 12 },
        ];
        for msg in msgs {
            let env = Envelope { node: "n1".into(), msg };
            assert_eq!(Envelope::decode(env.encode().as_bytes()), Some(env));
        }
    }

    #[test]
    fn a_key_survives_the_wire() {
        for key in [Key::Topic(1), Key::Community("pi".into()), Key::Inbox(9)] {
            assert_eq!(Key::from(WireKey::from(&key)), key);
        }
    }
}
