//! Look-alike usernames: `aIice` (a capital i) reads as `alice`, and
//! `rnod1` as `mod1`. Each name has two keys, built from its Unicode TR39
//! confusable skeleton (`unicode_security::skeleton`, which maps `I`, `1`
//! and `|` to `l`, `0` to `O`, `m` to `rn`...) lowercased, since names are
//! one account in any case: the key of the name as written, and the key of
//! the name lowercased (`ALICE` is the same account as `alice`, and `aIice`
//! reads as the latter). Two names look alike when any key of one is a key
//! of the other; `policy::may_take_name` refuses the second.

/// A name's look-alike keys, as the `users` table stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameKeys {
    /// Of the name as written (`skeleton`).
    pub written: String,
    /// Of the name lowercased (`skeleton_folded`).
    pub folded: String,
}

impl NameKeys {
    pub fn of(name: &str) -> NameKeys {
        NameKeys { written: key(name), folded: key(&name.to_lowercase()) }
    }

    /// Whether a name with these keys reads as one with `other`.
    pub fn meets(&self, other: &NameKeys) -> bool {
        [&self.written, &self.folded].iter().any(|k| **k == other.written || **k == other.folded)
    }
}

/// The skeleton lowercased: case is no difference between names.
fn key(name: &str) -> String {
    unicode_security::skeleton(name).flat_map(char::to_lowercase).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alike(a: &str, b: &str) -> bool {
        let (ka, kb) = (NameKeys::of(a), NameKeys::of(b));
        assert_eq!(ka.meets(&kb), kb.meets(&ka), "{a} and {b}: alike either way round or neither");
        ka.meets(&kb)
    }

    #[test]
    fn a_capital_i_reads_as_an_l_and_rn_as_m() {
        assert_eq!(NameKeys::of("aIice").written, NameKeys::of("alice").written);
        assert_eq!(NameKeys::of("rnod1").written, NameKeys::of("mod1").written);
        assert!(alike("aIice", "alice"));
        assert!(alike("rnod1", "mod1"));
        assert!(alike("rnodl", "mod1"));
        assert!(alike("b0b", "bob"));
        assert!(alike("AIice", "alice"));
    }

    #[test]
    fn names_that_differ_only_in_case_look_alike() {
        assert!(alike("Alice", "alice"));
        // ALICE is alice's account, and aIice reads as alice.
        assert!(alike("ALICE", "aIice"));
        assert!(alike("MOD1", "rnod1"));
    }

    #[test]
    fn names_that_read_differently_do_not() {
        assert!(!alike("alice", "alicia"));
        assert!(!alike("kai", "kal"), "a small i is no l");
        assert!(!alike("bob", "bobby"));
        assert!(!alike("user1", "user7"));
        assert!(!alike("mod_1", "mod-1"));
    }
}
