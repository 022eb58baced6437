//! The process's memory, read from `/proc/self/statm` when `/metrics` is
//! scraped (Linux only; elsewhere the gauges stay at 0).

/// Resident and virtual bytes of this process, when the kernel says.
pub fn memory() -> Option<(u64, u64)> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    parse_statm(&statm, page_size())
}

/// `statm` counts pages: size, resident, shared, ...
fn parse_statm(statm: &str, page: u64) -> Option<(u64, u64)> {
    let mut fields = statm.split_whitespace().map(|f| f.parse::<u64>().ok());
    let size = fields.next()??;
    let resident = fields.next()??;
    Some((resident * page, size * page))
}

fn page_size() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as u64 } else { 4096 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_pages_become_resident_and_virtual_bytes() {
        assert_eq!(parse_statm("100 25 10 1 0 30 0\n", 4096), Some((25 * 4096, 100 * 4096)));
        assert_eq!(parse_statm("garbage", 4096), None);
    }

    #[test]
    fn this_process_has_some_resident_memory() {
        let (rss, virt) = memory().expect("/proc/self/statm is readable on Linux");
        assert!(rss > 0 && virt >= rss, "rss {rss}, virtual {virt}");
    }
}
