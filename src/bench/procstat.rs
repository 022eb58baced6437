//! CPU time and resident memory of a process, read from Linux's `/proc`,
//! so a report can say who used the two cores during the measured window.
//! Elsewhere every reading is `None` and the report leaves the column out.

use std::time::{Duration, Instant};

/// One reading of a process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at: Instant,
    /// User plus system CPU time since the process started.
    pub cpu: Duration,
    /// Resident set size, in bytes.
    pub rss: u64,
    /// Peak resident set size since the process started (`VmHWM`), in bytes.
    pub rss_peak: u64,
}

/// Reads process `pid` (`None`: this process).
pub fn sample(pid: Option<u32>) -> Option<Sample> {
    let dir = match pid {
        Some(p) => format!("/proc/{p}"),
        None => "/proc/self".to_owned(),
    };
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("{dir}/status")).ok()?;
    let ticks = cpu_ticks(&stat)?;
    let rss = kb_field(&status, "VmRSS:")?;
    let rss_peak = kb_field(&status, "VmHWM:").unwrap_or(rss);
    Some(Sample { at: Instant::now(), cpu: ticks_to_duration(ticks, clock_ticks()), rss, rss_peak })
}

/// One reading of the whole machine's CPU time (`/proc/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// Ticks spent on anything but idle and I/O wait, all cores together.
    busy: u64,
    total: u64,
    cpus: u32,
}

pub fn machine() -> Option<Machine> {
    parse_machine(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Busy CPU of the whole machine between two readings, in percent of one
/// core (two busy cores: 200 %). Includes other processes and the kernel's
/// network processing, which no process is charged for.
pub fn machine_percent(before: &Machine, after: &Machine) -> f64 {
    let total = after.total.saturating_sub(before.total);
    if total == 0 {
        return 0.0;
    }
    after.busy.saturating_sub(before.busy) as f64 / total as f64 * after.cpus as f64 * 100.0
}

fn parse_machine(stat: &str) -> Option<Machine> {
    let mut lines = stat.lines();
    let first = lines.next()?.strip_prefix("cpu ")?;
    let ticks: Vec<u64> = first.split_whitespace().take(8).map(|t| t.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal
    let total: u64 = ticks.iter().sum();
    let idle = ticks.get(3)? + ticks.get(4)?;
    let cpus = lines.filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)).count();
    Some(Machine { busy: total - idle, total, cpus: cpus.max(1) as u32 })
}

/// CPU use between two readings, in percent of one core.
pub fn cpu_percent(before: &Sample, after: &Sample) -> f64 {
    let wall = after.at.duration_since(before.at).as_secs_f64();
    if wall <= 0.0 { 0.0 } else { after.cpu.saturating_sub(before.cpu).as_secs_f64() / wall * 100.0 }
}

/// utime + stime (fields 14 and 15 of `/proc/PID/stat`), in clock ticks.
/// The command name (field 2) may hold spaces and parentheses, so fields
/// are counted from the last `)`.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// A `kB` field of `/proc/PID/status` (`VmRSS:`, `VmHWM:`), in bytes.
fn kb_field(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn ticks_to_duration(ticks: u64, per_second: u64) -> Duration {
    Duration::from_nanos((ticks as u128 * 1_000_000_000 / per_second.max(1) as u128) as u64)
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 { n as u64 } else { 100 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_user_plus_system_time() {
        let stat = "4242 (pith serve) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 50 0 0 20 0 5 0 100 0 0";
        assert_eq!(cpu_ticks(stat), Some(200));
    }

    #[test]
    fn a_command_name_with_parentheses_does_not_shift_the_fields() {
        let stat = "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0";
        assert_eq!(cpu_ticks(stat), Some(7));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn rss_is_read_in_bytes() {
        let status = "Name:\tpith\nVmPeak:\t  99999 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t5\n";
        assert_eq!(kb_field(status, "VmRSS:"), Some(10 << 20));
        assert_eq!(kb_field(status, "VmHWM:"), Some(20 << 20));
        assert_eq!(kb_field("Name:\tkthread\n", "VmRSS:"), None);
    }

    #[test]
    fn machine_cpu_is_busy_time_over_all_cores() {
        let before =
            "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\nintr 1\n";
        let after = "cpu  200 0 150 1000 0 0 150 0 0 0\ncpu0 x\ncpu1 x\n";
        let (b, a) = (parse_machine(before).expect("parses"), parse_machine(after).expect("parses"));
        assert_eq!(b, Machine { busy: 200, total: 1000, cpus: 2 });
        // 300 of 500 ticks busy on 2 cores: 120 % of one core.
        assert!((machine_percent(&b, &a) - 120.0).abs() < 1e-9);
        assert_eq!(parse_machine("intr 1"), None);
    }

    #[test]
    fn ticks_convert_to_time() {
        assert_eq!(ticks_to_duration(250, 100), Duration::from_millis(2500));
    }

    #[test]
    fn cpu_percent_is_relative_to_one_core() {
        let at = Instant::now();
        let before = Sample { at, cpu: Duration::from_secs(1), rss: 0, rss_peak: 0 };
        let after = Sample { at: at + Duration::from_secs(10), cpu: Duration::from_secs(16), rss: 0, rss_peak: 0 };
        assert!((cpu_percent(&before, &after) - 150.0).abs() < 1e-9);
    }

    #[test]
    fn this_process_can_be_sampled_on_linux() {
        if cfg!(target_os = "linux") {
            let s = sample(None).expect("/proc/self is readable");
            assert!(s.rss > 0);
            assert!(s.rss_peak >= s.rss, "{s:?}");
        }
    }
}
