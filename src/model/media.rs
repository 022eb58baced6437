//! Pictures as the forum records them: a row per stored file
//! (`media::MediaName` names it), what an upload asks the store to record,
//! and the quotas it is checked against in the same transaction.

use serde::Serialize;

use super::Timestamp;

/// A stored picture.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Media {
    /// The file's name under `/media/`.
    pub name: String,
    /// Who uploaded it first; `None` once that account is deleted.
    pub owner_id: Option<i64>,
    /// The picture and its thumbnail on disk, together.
    pub bytes: i64,
    pub width: u32,
    pub height: u32,
    pub content_type: String,
    pub created_at: Timestamp,
}

/// The quotas an upload is checked against; 0 is no quota.
#[derive(Debug, Clone, Copy, Default)]
pub struct MediaQuota {
    /// Bytes one account's pictures may take.
    pub user_bytes: u64,
    /// Bytes all pictures together may take.
    pub total_bytes: u64,
}

/// What recording an upload came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// A new row.
    New(Media),
    /// The same picture was stored already (by anyone): its row, uncharged.
    Existing(Media),
    /// Over the uploader's quota, with what they use now.
    OverUserQuota { used: i64 },
    /// Over the site's quota, with what all pictures take now.
    OverTotalQuota { used: i64 },
}

/// How much is stored: by one account, or by everyone.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct MediaUsage {
    pub files: i64,
    pub bytes: i64,
}

/// The quota `new_bytes` more would break, given what the uploader and the
/// site use now: the rule `Store::record_media` applies in its transaction.
pub fn over_quota(quota: MediaQuota, user_used: i64, total_used: i64, new_bytes: i64) -> Option<Recorded> {
    let over = |limit: u64, used: i64| limit > 0 && used.saturating_add(new_bytes) as u64 > limit;
    if over(quota.total_bytes, total_used) {
        return Some(Recorded::OverTotalQuota { used: total_used });
    }
    if over(quota.user_bytes, user_used) {
        return Some(Recorded::OverUserQuota { used: user_used });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_of_zero_is_none_and_the_site_quota_is_checked_first() {
        assert_eq!(over_quota(MediaQuota::default(), i64::MAX / 2, i64::MAX / 2, 10), None);
        let q = MediaQuota { user_bytes: 100, total_bytes: 1000 };
        assert_eq!(over_quota(q, 90, 500, 10), None);
        assert_eq!(over_quota(q, 91, 500, 10), Some(Recorded::OverUserQuota { used: 91 }));
        assert_eq!(over_quota(q, 91, 995, 10), Some(Recorded::OverTotalQuota { used: 995 }));
    }
}
