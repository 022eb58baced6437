//! The directory of stored pictures, `DATA_DIR/media/`: each file at
//! `media/HH/NAME`, HH the name's first two hex digits (so no directory
//! holds more than a 256th of them). A file is written to a temporary name
//! in its directory, synced, renamed into place and the directory synced:
//! once `write` returns, the file survives a power cut, and no reader ever
//! sees half of one. Several nodes share the directory (docs/DEPLOY.md).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use super::MediaName;

/// Temporary files start with this; `pith media gc` removes old ones.
pub const TEMP_PREFIX: &str = ".tmp-";

#[derive(Debug, Clone)]
pub struct MediaDir {
    root: PathBuf,
}

/// A file found in the directory.
#[derive(Debug, Clone)]
pub enum Found {
    /// A stored picture or thumbnail, and when it was last written.
    Media(MediaName, SystemTime),
    /// Anything else (a temporary file left by a crash, a stray file).
    Other(PathBuf, SystemTime),
}

impl MediaDir {
    pub fn new(root: impl Into<PathBuf>) -> MediaDir {
        MediaDir { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the file of `name` lives.
    pub fn path(&self, name: &MediaName) -> PathBuf {
        self.root.join(name.shard()).join(name.to_string())
    }

    pub fn exists(&self, name: &MediaName) -> bool {
        self.path(name).is_file()
    }

    /// Writes `bytes` as `name`, durably; false when the file was there
    /// already (the same name is the same bytes).
    pub fn write(&self, name: &MediaName, bytes: &[u8]) -> std::io::Result<bool> {
        let path = self.path(name);
        if path.is_file() {
            return Ok(false);
        }
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir)?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let temp =
            dir.join(format!("{TEMP_PREFIX}{}-{}-{name}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        let written = (|| {
            let mut file = std::fs::File::create(&temp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            std::fs::rename(&temp, &path)?;
            std::fs::File::open(dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written.map(|()| true)
    }

    /// Removes the picture `name` and its thumbnail; a missing file is
    /// not an error.
    pub fn remove(&self, name: &MediaName) -> std::io::Result<()> {
        for n in [name.full(), name.thumbnail()] {
            match std::fs::remove_file(self.path(&n)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Every file under the directory (none when it does not exist).
    pub fn list(&self) -> std::io::Result<Vec<Found>> {
        let mut found = Vec::new();
        let shards = match std::fs::read_dir(&self.root) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(e),
        };
        for shard in shards {
            let shard = shard?;
            if !shard.file_type()?.is_dir() {
                found.push(Found::Other(shard.path(), modified(&shard.path())));
                continue;
            }
            for entry in std::fs::read_dir(shard.path())? {
                let entry = entry?;
                let path = entry.path();
                let when = modified(&path);
                let name = entry.file_name().to_str().and_then(MediaName::parse);
                match name {
                    Some(name) if name.shard() == shard.file_name().to_string_lossy() => {
                        found.push(Found::Media(name, when))
                    }
                    _ => found.push(Found::Other(path, when)),
                }
            }
        }
        Ok(found)
    }
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::Kind;

    #[test]
    fn a_file_is_written_once_listed_and_removed_with_its_thumbnail() {
        let tmp = std::env::temp_dir().join(format!("pith-media-files-{}", std::process::id()));
        let dir = MediaDir::new(&tmp);
        let name = MediaName::of(b"abc", 3, 4, Kind::Png);
        assert!(dir.write(&name, b"abc").expect("write"));
        assert!(!dir.write(&name, b"abc").expect("again"), "the same name is not written twice");
        assert!(dir.write(&name.thumbnail(), b"t").expect("thumb"));
        let names: Vec<MediaName> = dir
            .list()
            .expect("list")
            .into_iter()
            .filter_map(|f| match f {
                Found::Media(n, _) => Some(n),
                Found::Other(..) => None,
            })
            .collect();
        assert_eq!(names.len(), 2);
        dir.remove(&name).expect("remove");
        assert!(!dir.exists(&name) && !dir.exists(&name.thumbnail()));
        dir.remove(&name).expect("removing again is no error");
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
