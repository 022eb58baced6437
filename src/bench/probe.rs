//! `--topics auto`: find the highest topic id on a live server. Seeded
//! topics are numbered 1..=N, so a doubling search followed by a binary
//! search finds N in about 2·log2(N) requests.

use super::conn::{Target, get_status};

/// Highest id for which `exists` holds, assuming ids 1..=N exist and none
/// above. Errors when id 1 does not exist or no end is found below 2^40
/// (a server that answers every id, like `pith bench hello`).
pub async fn find_last(mut exists: impl AsyncFnMut(u64) -> anyhow::Result<bool>) -> anyhow::Result<u64> {
    if !exists(1).await? {
        anyhow::bail!("topic 1 does not exist: seed the server first, or pass --topics N");
    }
    let (mut lo, mut hi) = (1u64, 2u64);
    while exists(hi).await? {
        lo = hi;
        hi *= 2;
        if hi > 1 << 40 {
            anyhow::bail!("every topic id seems to exist; pass --topics N");
        }
    }
    // exists(lo) and !exists(hi)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists(mid).await? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Highest topic id on the server at `target` (200: exists, 404: not).
pub async fn max_topic(target: &Target) -> anyhow::Result<u64> {
    let mut sender = None;
    let mut probes = 0u32;
    let last = find_last(async |id| {
        probes += 1;
        match get_status(target, &mut sender, &format!("/api/v1/topics/{id}")).await {
            Ok(200) => Ok(true),
            Ok(404) => Ok(false),
            Ok(other) => anyhow::bail!("GET /api/v1/topics/{id} answered {other}; pass --topics N"),
            Err(e) => anyhow::bail!("cannot probe topics: {e}"),
        }
    })
    .await?;
    tracing::debug!(probes, last, "found the highest topic id");
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn last_with(n: u64) -> (anyhow::Result<u64>, u32) {
        let mut probes = 0;
        let r = find_last(async |id| {
            probes += 1;
            Ok(id <= n)
        })
        .await;
        (r, probes)
    }

    #[tokio::test]
    async fn the_last_id_is_found_for_any_count() {
        for n in [1, 2, 3, 4, 5, 7, 8, 9, 1000, 4021, 65_536, 1_000_000] {
            let (r, probes) = last_with(n).await;
            assert_eq!(r.expect("found"), n);
            assert!(probes <= 2 * (64 - n.leading_zeros()) + 2, "{probes} probes for {n}");
        }
    }

    #[tokio::test]
    async fn an_empty_server_or_one_that_answers_everything_is_an_error() {
        assert!(last_with(0).await.0.is_err());
        assert!(last_with(u64::MAX).await.0.is_err());
    }
}
