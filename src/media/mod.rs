//! Pictures: what an upload becomes, and where its bytes live.
//!
//! - `process`: an upload's bytes checked, decoded, turned upright,
//!   shrunk and re-encoded (pure: bytes in, bytes out).
//! - `name`: the content-addressed names of the files (`HASH-WxH.EXT`,
//!   and `HASH-WxH.t.EXT` for the thumbnail), which carry the picture's
//!   size so Markdown can set `width` and `height` without a query.
//! - `files`: the directory of those files (`DATA_DIR/media/`), written
//!   atomically and durably before the row that names them commits.
//! - `pool`: the bounded pool decoding runs on, one worker per core, with
//!   a time limit per picture, never on the async runtime's threads.

pub mod files;
pub mod name;
pub mod pool;
pub mod process;

pub use name::MediaName;
pub use process::{Kind, Limits, Processed, Refusal};
