//! What the machine gives this process (memory, cores, open files; the
//! cgroup's limits when it has any, as under systemd or in a container)
//! and the settings `pith serve` sizes from it when none is set: the
//! values `pith config` shows with the source `auto`. An explicit setting
//! (flag, environment, file) always wins; `--memory-mb` is the one knob
//! the others derive from. The table for common boards is in
//! docs/DEPLOY.md ("Defaults that fit the board"), and the tests below
//! hold it.

use std::path::Path;

/// The machine as the process sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// Physical memory, or the cgroup's memory limit when lower, in MiB.
    pub memory_mb: u64,
    /// Cores the process may run on (the CPU quota and affinity count).
    pub cores: usize,
    /// The open-file limit the process runs with (after `raise_open_files`).
    pub open_files: u64,
}

impl Machine {
    /// Reads this machine: `/proc/meminfo`, the cgroup's `memory.max`
    /// (v2) or `memory.limit_in_bytes` (v1), the available parallelism and
    /// `RLIMIT_NOFILE`. Anything unreadable falls back to a small board's
    /// figure (1 GiB, 1 core, 1024 files), never an error.
    pub fn detect() -> Machine {
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let memory_mb = memory_mb(Path::new("/"), &cgroup).unwrap_or(1024);
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        Machine { memory_mb, cores, open_files: raise_open_files().unwrap_or(1024) }
    }

    /// `1024 MiB, 4 cores, 1024 open files`: what `pith config` shows as
    /// the origin of an `auto` value.
    pub fn describe(&self) -> String {
        format!("{} MiB, {} cores, {} open files", self.memory_mb, self.cores, self.open_files)
    }
}

/// The settings sized from a machine (or from `--memory-mb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// The whole process's memory budget, in MiB (`--memory-mb`).
    pub memory_mb: u64,
    /// The rendered-response cache (`--cache-mb`).
    pub cache_mb: usize,
    /// SQLite reader connections (`--readers`).
    pub readers: usize,
    /// HTTP connections at once (`--max-connections`).
    pub max_connections: usize,
    /// Live subscribers at once (`--live-max-sockets`).
    pub live_max_sockets: usize,
    /// Frames waiting for slow live subscribers, in all (`--live-max-pending-total-mb`).
    pub live_max_pending_total_mb: usize,
}

/// Open files kept for what is not a client: the database and its WAL,
/// each reader's handles, listeners, logs, the backup's copy.
const RESERVED_FILES: u64 = 256;
/// What an idle live subscriber costs, kernel socket and Pith's state
/// together (docs/PERFORMANCE.md measures the user-space part under
/// 1 KiB; an idle TCP socket holds no buffers in the kernel).
const LIVE_SOCKET_BYTES: u64 = 4 << 10;
/// An HTTP connection in flight: a request being parsed and answered.
const CONNECTION_BYTES: u64 = 16 << 10;

impl Sizing {
    /// The budget a machine gives Pith when `--memory-mb` is not set:
    /// 3/8 of its memory, so a Pi keeps room for the page cache (which
    /// holds the SQLite file), the OS and an SSH session.
    pub fn default_budget_mb(machine: &Machine) -> u64 {
        (machine.memory_mb * 3 / 8).clamp(64, 16 << 10)
    }

    /// The rule. Half the budget for the cache (the one structure that
    /// grows with the forum); a reader per core, but no more than one per
    /// 32 MiB of budget (each has its own SQLite page cache); the open
    /// files left after `RESERVED_FILES` split a quarter to HTTP
    /// connections (at most 10,000: they are short-lived) and the rest to
    /// live subscribers, each also within a quarter of the budget; an
    /// eighth of the budget for frames queued to slow subscribers.
    pub fn from(machine: &Machine, memory_mb: u64) -> Sizing {
        let budget = memory_mb.max(16);
        let bytes = budget << 20;
        let files = machine.open_files.saturating_sub(RESERVED_FILES).max(64);
        let max_connections = (files / 4).min(10_000).min(bytes / 4 / CONNECTION_BYTES).max(16);
        let live_max_sockets = (files - max_connections.min(files)).min(bytes / 4 / LIVE_SOCKET_BYTES).max(16);
        Sizing {
            memory_mb: budget,
            cache_mb: usize_of(budget / 2).clamp(8, 8 << 10),
            readers: machine.cores.clamp(1, 16).min(usize_of(budget / 32).max(1)),
            max_connections: usize_of(max_connections),
            live_max_sockets: usize_of(live_max_sockets),
            live_max_pending_total_mb: usize_of(budget / 8).clamp(4, 512),
        }
    }
}

fn usize_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Total memory in MiB: `MemTotal` under `root/proc/meminfo`, lowered by
/// the limit of the cgroup named in `cgroup` (the text of
/// `/proc/self/cgroup`) under `root/sys/fs/cgroup`. `root` is `/` except
/// in tests.
pub fn memory_mb(root: &Path, cgroup: &str) -> Option<u64> {
    let meminfo = std::fs::read_to_string(root.join("proc/meminfo")).ok()?;
    let total_kb: u64 =
        meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    let total = total_kb / 1024;
    Some(match cgroup_limit_bytes(root, cgroup) {
        Some(limit) => total.min(limit >> 20),
        None => total,
    })
}

/// The memory limit of the process's cgroup, walking up its path (a limit
/// set on a parent applies to its children): v2's `memory.max` (`max` is
/// none), or v1's `memory.limit_in_bytes` (a huge number is none).
fn cgroup_limit_bytes(root: &Path, cgroup: &str) -> Option<u64> {
    let base = root.join("sys/fs/cgroup");
    let mut lowest: Option<u64> = None;
    for line in cgroup.lines() {
        // `0::/system.slice/pith.service` (v2) or `9:memory:/user.slice` (v1).
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (dir, file) = match controllers {
            "" => (base.clone(), "memory.max"),
            c if c.split(',').any(|c| c == "memory") => (base.join("memory"), "memory.limit_in_bytes"),
            _ => continue,
        };
        let mut at = Some(Path::new(path.trim()));
        while let Some(p) = at {
            let text = std::fs::read_to_string(dir.join(p.strip_prefix("/").unwrap_or(p)).join(file));
            if let Some(limit) = text.ok().and_then(|t| t.trim().parse::<u64>().ok()).filter(|&l| l < 1 << 60) {
                lowest = Some(lowest.map_or(limit, |l| l.min(limit)));
            }
            at = p.parent();
        }
    }
    lowest
}

/// Raises the soft open-file limit to the hard one (as Go's runtime does
/// at start): a socket is a file, and the soft default of 1024 would cap
/// the forum at about a thousand clients while the hard limit allows far
/// more. Returns the limit the process now has.
pub fn raise_open_files() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit and setrlimit read and write the struct given.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
                return None;
            }
            if lim.rlim_cur < lim.rlim_max {
                let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    lim.rlim_cur = lim.rlim_max;
                }
            }
        }
        #[allow(clippy::useless_conversion)] // rlim_t is u64 on Linux, not everywhere.
        Some(u64::try_from(lim.rlim_cur).unwrap_or(u64::MAX))
    }
    #[cfg(not(unix))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(memory_mb: u64, cores: usize, open_files: u64) -> Sizing {
        let m = Machine { memory_mb, cores, open_files };
        Sizing::from(&m, Sizing::default_budget_mb(&m))
    }

    #[test]
    fn a_pi_zero_2_w_gets_a_small_budget_and_few_readers() {
        // 512 MB board (the kernel reports ~427 MiB), 4 cores, systemd's LimitNOFILE.
        let s = board(427, 4, 262_144);
        assert_eq!(s.memory_mb, 160);
        assert_eq!(s.cache_mb, 80);
        assert_eq!(s.readers, 4);
        assert_eq!(s.max_connections, 2_560);
        assert_eq!(s.live_max_sockets, 10_240);
        assert_eq!(s.live_max_pending_total_mb, 20);
    }

    #[test]
    fn a_pi_3_with_a_login_shells_open_file_limit_is_bound_by_files() {
        let s = board(906, 4, 1024);
        assert_eq!(s.memory_mb, 339);
        assert_eq!(s.cache_mb, 169);
        assert_eq!(s.readers, 4);
        assert_eq!(s.max_connections, 192);
        assert_eq!(s.live_max_sockets, 576);
        assert!(s.max_connections + s.live_max_sockets + 256 <= 1024);
    }

    #[test]
    fn a_pi_5_with_8_gb_holds_hundreds_of_thousands_of_live_subscribers() {
        let s = board(7_940, 4, 262_144);
        assert_eq!(s.memory_mb, 2_977);
        assert_eq!(s.cache_mb, 1_488);
        assert_eq!(s.max_connections, 10_000);
        assert_eq!(s.live_max_sockets, 190_528);
        assert_eq!(s.live_max_pending_total_mb, 372);
    }

    #[test]
    fn an_explicit_memory_budget_sizes_the_rest_and_tiny_budgets_stay_usable() {
        let big = Machine { memory_mb: 64_000, cores: 32, open_files: 1_048_576 };
        let s = Sizing::from(&big, 128);
        assert_eq!((s.memory_mb, s.cache_mb, s.readers), (128, 64, 4));
        let tiny = Sizing::from(&Machine { memory_mb: 100, cores: 1, open_files: 10 }, 1);
        assert_eq!((tiny.memory_mb, tiny.cache_mb, tiny.readers), (16, 8, 1));
        assert!(tiny.max_connections >= 16 && tiny.live_max_sockets >= 16);
        assert_eq!(Sizing::default_budget_mb(&big), 16 << 10);
    }

    /// A fake `/proc` and `/sys/fs/cgroup` under a temporary root.
    fn fake_root(meminfo_kb: u64, files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        let proc = dir.path().join("proc");
        std::fs::create_dir_all(&proc).expect("proc");
        std::fs::write(proc.join("meminfo"), format!("MemTotal:       {meminfo_kb} kB\nMemFree: 1 kB\n"))
            .expect("meminfo");
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("dirs");
            std::fs::write(p, text).expect("file");
        }
        dir
    }

    #[test]
    fn memory_is_the_lower_of_meminfo_and_the_cgroup_v2_limit_on_the_path() {
        let root = fake_root(
            8_000_000,
            &[
                ("sys/fs/cgroup/system.slice/memory.max", "1073741824\n"),
                ("sys/fs/cgroup/system.slice/pith.service/memory.max", "max\n"),
            ],
        );
        let cgroup = "0::/system.slice/pith.service\n";
        assert_eq!(memory_mb(root.path(), cgroup), Some(1024));
        assert_eq!(memory_mb(root.path(), "0::/user.slice\n"), Some(7812));
    }

    #[test]
    fn a_cgroup_v1_memory_limit_counts_and_its_no_limit_value_does_not() {
        let root = fake_root(
            4_000_000,
            &[
                ("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912\n"),
                ("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"),
            ],
        );
        assert_eq!(memory_mb(root.path(), "4:cpu:/x\n9:memory,foo:/docker/abc\n"), Some(512));
        assert_eq!(memory_mb(root.path(), "9:memory:/\n"), Some(3906));
    }

    #[test]
    fn an_unreadable_machine_is_none_and_detection_never_fails() {
        let empty = tempfile::tempdir().expect("temp dir");
        assert_eq!(memory_mb(empty.path(), ""), None);
        let m = Machine::detect();
        assert!(m.memory_mb > 0 && m.cores > 0 && m.open_files > 0, "{m:?}");
    }
}
