//! What `pith migrate` copies: the tables in an order that satisfies their
//! foreign keys, one backend-neutral value type, and the order-independent
//! checksum both sides are compared by.

/// Every table of the portable schema (migrations/sqlite, migrations/postgres),
/// parents before children. Derived search data (SQLite's FTS5 tables,
/// PostgreSQL's generated `fts` columns) is not copied: the target rebuilds it.
pub const TABLES: &[&str] = &[
    // Before `users`: a remote user's row names its actor.
    "ap_actors",
    "users",
    "tokens",
    "communities",
    "topics",
    "topic_counts",
    "posts",
    "votes",
    "saves",
    "moderators",
    "bans",
    "reports",
    "mod_log",
    "notifications",
    "site",
    "invites",
    "community_blocks",
    "messages",
    "conversations",
    "message_reports",
    "user_blocks",
    "emails",
    "mail_tokens",
    "outbox",
    "recovery_codes",
    "media",
    "media_refs",
    "ap_keys",
    "ap_followers",
    "ap_deliveries",
    "ap_instances",
    "ap_objects",
    "ap_following",
];

/// Tables the schema itself fills (one settings row), which a new database
/// is not empty without: their rows are replaced, not refused.
pub const PRESET: &[&str] = &["site"];

/// Counts the schema's triggers keep (migrations: community topic count),
/// counted again once every row is in: a community's copied count, then
/// its topics counted by the trigger as they go in, would be twice the
/// count. Both backends run this statement.
pub const RECOUNT: &str = "UPDATE communities SET topic_count = (SELECT count(*) FROM topics t \
     WHERE t.community_id = communities.id AND NOT t.deleted AND NOT t.removed)";

/// Rows sent from the reader to the writer at a time.
pub const BATCH: usize = 500;

/// One column value, as both backends can hold it. PostgreSQL's BOOLEAN is
/// SQLite's 0/1 integer, so booleans become `Int` when read.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

pub type Row = Vec<Value>;

/// A table's row count and the wrapping sum of its rows' 128-bit hashes:
/// equal for the same set of rows in any order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub rows: u64,
    pub sum: u128,
}

impl Tally {
    pub fn add(&mut self, row: &[Value]) {
        self.rows += 1;
        self.sum = self.sum.wrapping_add(xxhash_rust::xxh3::xxh3_128(&canonical(row)));
    }

    pub fn hex(&self) -> String {
        format!("{:032x}", self.sum)
    }
}

/// A row as unambiguous bytes: a tag per value, lengths before contents.
pub fn canonical(row: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    for v in row {
        match v {
            Value::Null => out.push(b'n'),
            Value::Int(i) => {
                out.push(b'i');
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Real(f) => {
                out.push(b'r');
                out.extend_from_slice(&f.to_bits().to_le_bytes());
            }
            Value::Text(s) => {
                out.push(b't');
                out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            Value::Blob(b) => {
                out.push(b'b');
                out.extend_from_slice(&(b.len() as u64).to_le_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_ignores_row_order_but_not_content() {
        let a = vec![Value::Int(1), Value::Text("ann".into()), Value::Null];
        let b = vec![Value::Int(2), Value::Blob(vec![1, 2]), Value::Real(0.5)];
        let (mut x, mut y) = (Tally::default(), Tally::default());
        x.add(&a);
        x.add(&b);
        y.add(&b);
        y.add(&a);
        assert_eq!(x, y);
        let mut z = Tally::default();
        z.add(&a);
        z.add(&[Value::Int(2), Value::Blob(vec![1, 2]), Value::Real(0.25)]);
        assert_ne!(x, z);
    }

    #[test]
    fn values_of_different_types_never_collide() {
        let one = canonical(&[Value::Text("1".into())]);
        assert_ne!(one, canonical(&[Value::Int(1)]));
        assert_ne!(one, canonical(&[Value::Blob(b"1".to_vec())]));
        assert_ne!(
            canonical(&[Value::Text("ab".into()), Value::Text("c".into())]),
            canonical(&[Value::Text("a".into()), Value::Text("bc".into())])
        );
    }
}
