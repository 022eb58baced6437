//! The properties Pith's fuzz targets check, as plain functions of the
//! input bytes: `fuzz_targets/*.rs` call them, and the root crate's
//! `tests/it/fuzz_regressions.rs` includes these same files to replay the
//! saved inputs under `cargo test`.

pub mod checks;
pub mod inert;
