//! `pith bench encode FILE...`: what each content coding makes of some
//! answers (topics saved from a server) at each level, with the functions
//! the cache uses: bytes, the ratio to identity, and the CPU time per
//! answer. `bench/wire.sh` runs it on the heavy data set.

use std::time::{Duration, Instant};

use clap::Args;

use crate::cache::encoding::{self, Encoding};

#[derive(Debug, Clone, Args)]
pub struct EncodeArgs {
    /// Files holding one answer each (identity bytes).
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,

    /// Compressions per file and level; the median counts.
    #[arg(long, short = 'n', default_value_t = 3)]
    pub repeat: usize,

    /// Levels measured, as CODING:LEVEL,LEVEL... (codings: gzip, zstd, br).
    #[arg(long, value_delimiter = ' ', default_value = "gzip:5,9 zstd:3,12,15,19 br:5,9,10,11")]
    pub levels: Vec<String>,
}

/// (coding, level) pairs from `--levels`.
fn parse_levels(specs: &[String]) -> anyhow::Result<Vec<(Encoding, i32)>> {
    let mut out = Vec::new();
    for spec in specs.iter().filter(|s| !s.is_empty()) {
        let (name, levels) = spec.split_once(':').ok_or_else(|| anyhow::anyhow!("{spec}: want CODING:LEVELS"))?;
        let encoding = match name {
            "gzip" => Encoding::Gzip,
            "zstd" => Encoding::Zstd,
            "br" => Encoding::Brotli,
            _ => anyhow::bail!("{name}: not gzip, zstd or br"),
        };
        for level in levels.split(',') {
            out.push((encoding, level.trim().parse()?));
        }
    }
    Ok(out)
}

fn compress(data: &[u8], encoding: Encoding, level: i32) -> anyhow::Result<Vec<u8>> {
    Ok(match encoding {
        Encoding::Identity => data.to_vec(),
        Encoding::Gzip => encoding::gzip(data, level.try_into()?)?,
        Encoding::Zstd => encoding::zstd(data, level)?,
        Encoding::Brotli => encoding::brotli(data, level.try_into()?, &|| true)?,
    })
}

/// 1 Gbit/s in body bytes per second, less `head` bytes per answer.
pub fn per_gbit(body: f64, head: f64) -> f64 {
    125_000_000.0 / (body + head)
}

pub fn main(args: EncodeArgs) -> anyhow::Result<()> {
    let levels = parse_levels(&args.levels)?;
    let files: Vec<Vec<u8>> = args.files.iter().map(std::fs::read).collect::<Result<_, _>>()?;
    let identity: usize = files.iter().map(Vec::len).sum();
    let n = files.len().max(1) as f64;
    println!(
        "{} answers, {:.0} KB of identity on average; the cache's levels: gzip {}, zstd {}, br {}",
        files.len(),
        identity as f64 / n / 1000.0,
        encoding::GZIP_LEVEL,
        encoding::ZSTD_LEVEL,
        encoding::BROTLI_QUALITY
    );
    println!("| coding | level | KB per answer | identity / coded | ms per answer | answers/s in 1 Gbit |");
    println!("|---|--:|--:|--:|--:|--:|");
    println!(
        "| identity | | {:.1} | 1.00 | 0 | {:.0} |",
        identity as f64 / n / 1000.0,
        per_gbit(identity as f64 / n, 0.0)
    );
    for (encoding, level) in levels {
        let mut bytes = 0;
        let mut time = Duration::ZERO;
        for data in &files {
            let mut times = Vec::new();
            let mut size = 0;
            for _ in 0..args.repeat.max(1) {
                let started = Instant::now();
                size = compress(data, encoding, level)?.len();
                times.push(started.elapsed());
            }
            bytes += size;
            times.sort();
            time += times[times.len() / 2];
        }
        println!(
            "| {} | {level} | {:.1} | {:.2} | {:.1} | {:.0} |",
            encoding.name(),
            bytes as f64 / n / 1000.0,
            identity as f64 / bytes.max(1) as f64,
            time.as_secs_f64() * 1e3 / n,
            per_gbit(bytes as f64 / n, 0.0)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_read_per_coding() {
        let specs = ["gzip:1,5".to_owned(), "br:11".to_owned(), String::new()];
        let levels = parse_levels(&specs).expect("parsed");
        assert_eq!(levels, [(Encoding::Gzip, 1), (Encoding::Gzip, 5), (Encoding::Brotli, 11)]);
        assert!(parse_levels(&["lz4:1".to_owned()]).is_err());
        assert!(parse_levels(&["gzip".to_owned()]).is_err());
    }

    #[test]
    fn a_gigabit_carries_125_million_bytes_a_second() {
        assert_eq!(per_gbit(767_000.0, 0.0).round(), 163.0);
        assert_eq!(per_gbit(1000.0, 250.0).round(), 100_000.0);
    }
}
