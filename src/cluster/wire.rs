//! What nodes send each other: one JSON object per message, tagged with
//! the sender's node id so a node can skip its own.

use serde::{Deserialize, Serialize};

use crate::model::Change;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Msg {
    /// A write committed on the sending node.
    Change { change: Box<Change> },
    /// Drop the whole cache: the sender may have lost invalidations.
    Flush,
    /// PostgreSQL only: a message too big for NOTIFY, stored under this id
    /// in `pith_bus_spill`.
    Spilled { id: i64 },
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
            Msg::Change { change: Box::new(Change::TopicChanged { topic_id: 7, by: None }) },
            Msg::Change { change: Box::new(Change::PostRemoved { topic_id: 7, post_id: 70, by: None }) },
            Msg::Change { change: Box::new(Change::TokensRevoked { user_id: 3 }) },
            // The voter rides along for federation (`outbound`).
            Msg::Change {
                change: Box::new(Change::Scored {
                    topic_id: 7,
                    post_id: Some(70),
                    score: 2,
                    by: Some(crate::model::change::Voter { user_id: 3, name: "ann".into(), value: 1 }),
                    seq: None,
                }),
            },
            Msg::Flush,
            Msg::Spilled { id: 12 },
        ];
        for msg in msgs {
            let env = Envelope { node: "n1".into(), msg };
            assert_eq!(Envelope::decode(env.encode().as_bytes()), Some(env));
        }
    }
}
