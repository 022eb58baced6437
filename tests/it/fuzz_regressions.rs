//! Replays every saved fuzz input (crashes found once, and the seeds) through
//! the very checks the cargo-fuzz targets run, so a fixed parser bug stays
//! fixed under a plain `cargo test`, without nightly or libFuzzer.
//!
//! Inputs live in `fuzz/regressions/TARGET/` and `fuzz/corpus/TARGET/seed-*`.

use std::path::Path;

#[path = "../../fuzz/src/checks.rs"]
mod checks;
#[path = "../../fuzz/src/inert.rs"]
mod inert;

/// Runs `check` on each saved input of `target`; returns how many ran.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut inputs = Vec::new();
    for (dir, seeds_only) in [(root.join("regressions").join(target), false), (root.join("corpus").join(target), true)]
    {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let seed = entry.file_name().to_string_lossy().starts_with("seed-");
            if entry.path().is_file() && (seed || !seeds_only) {
                inputs.push(entry.path());
            }
        }
    }
    inputs.sort();
    for path in &inputs {
        let data = std::fs::read(path).expect("readable fuzz input");
        if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
            let why = panic.downcast_ref::<String>().map(String::as_str).or(panic.downcast_ref::<&str>().copied());
            panic!("{} fails again: {}", path.display(), why.unwrap_or("(panic)"));
        }
    }
    inputs.len()
}

#[test]
fn saved_markdown_inputs_render_inert() {
    assert!(replay("markdown", checks::markdown) > 0, "no saved markdown inputs");
}

#[test]
fn saved_live_protocol_inputs_decode() {
    assert!(replay("live_proto", checks::live_proto) > 0, "no saved live_proto inputs");
}

#[test]
fn saved_cursor_inputs_round_trip() {
    assert!(replay("cursor", checks::cursor) > 0, "no saved cursor inputs");
}

#[test]
fn saved_query_strings_parse_or_are_refused() {
    assert!(replay("query", checks::query) > 0, "no saved query inputs");
}

#[test]
fn saved_request_heads_reach_the_hot_path_only_when_whole_and_plain() {
    assert!(replay("request_head", checks::request_head) > 0, "no saved request_head inputs");
}

#[test]
fn saved_pictures_are_refused_or_processed_within_the_limits() {
    assert!(replay("media", checks::media) > 0, "no saved media inputs");
}

#[test]
fn saved_activities_are_refused_or_taken_within_their_rules() {
    assert!(replay("activity", checks::activity) > 0, "no saved activity inputs");
}
