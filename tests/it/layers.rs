//! The layers of `src/`, held: one declared order of the top-level
//! modules, bottom to top (the same as `src/lib.rs`'s layout map). Every
//! `crate::NAME` path in a file under `src/` must name a module of a lower
//! layer, or its own module; a module that reaches above its layer, or
//! across to a sibling of its layer, fails the test with the file and the
//! import.

use std::collections::BTreeMap;
use std::path::Path;

/// Bottom to top. In an `open` layer the modules may use each other; no
/// layer is open today, so no import cycle spans two top-level modules.
/// The commands come last: their arguments (`config`), then the commands,
/// then the command line that gathers them all (`config_file`).
const LAYERS: &[(&[&str], bool)] = &[
    (&["priority"], false),
    (&["media"], false),
    (&["settings", "markdown", "logging", "memory", "machine", "tls13"], false),
    (&["model"], false),
    (&["store"], false),
    (&["cache", "live"], false),
    (&["cluster", "metrics"], false),
    (&["app"], false),
    (&["net"], false),
    (&["api", "web", "activitypub"], false),
    (&["server"], false),
    (&["config"], false),
    (&["backup"], false),
    (&["serve", "seed", "users", "instances", "migrate"], false),
    (&["bench"], false),
    (&["config_file"], false),
];

/// (layer, open) of a top-level module, `None` when it is in no layer.
fn layer_of(module: &str) -> Option<(usize, bool)> {
    LAYERS.iter().enumerate().find(|(_, (names, _))| names.contains(&module)).map(|(i, (_, open))| (i, *open))
}

/// The top-level module a file under `src/` belongs to (`src/app/read.rs`
/// -> `app`); `None` for the crate root and the binary.
fn module_of(relative: &str) -> Option<String> {
    let first = relative.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_owned())
}

/// Every `crate::NAME` in the code of `text`, with its line; comments are
/// left out (a doc may name a module above its own).
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" // ").next().unwrap_or(code);
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let before = rest[..i].chars().last();
            rest = &rest[i + "crate::".len()..];
            // `pith_crate::x` or `$crate::x` are other things.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push((n + 1, name));
            }
        }
    }
    out
}

/// Each import that breaks the order, as `file:line: module uses X (...)`.
fn violations(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        let Some(module) = module_of(path) else { continue };
        let Some((own, open)) = layer_of(&module) else {
            found.push(format!("src/{path}: module `{module}` is in no layer of tests/it/layers.rs"));
            continue;
        };
        for (line, used) in crate_paths(text) {
            if used == module {
                continue;
            }
            let Some((theirs, _)) = layer_of(&used) else { continue };
            if theirs > own {
                found.push(format!("src/{path}:{line}: `{module}` uses `crate::{used}`, a higher layer"));
            } else if theirs == own && !open {
                found.push(format!("src/{path}:{line}: `{module}` uses `crate::{used}`, a sibling in its layer"));
            }
        }
    }
    found
}

fn read_tree(dir: &Path, base: &Path, into: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            read_tree(&path, base, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(base).expect("under src").to_string_lossy().replace('\\', "/");
            into.insert(relative, std::fs::read_to_string(&path).expect("utf-8 source"));
        }
    }
}

#[test]
fn no_module_under_src_reaches_above_its_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    read_tree(&src, &src, &mut files);
    assert!(files.len() > 50, "read {} files", files.len());
    let found = violations(&files);
    assert!(found.is_empty(), "imports against the layers:\n{}", found.join("\n"));
}

#[test]
fn every_top_level_module_has_a_layer() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).expect("lib.rs");
    for line in lib.lines() {
        if let Some(name) = line.strip_prefix("pub mod ").and_then(|l| l.strip_suffix(';')) {
            assert!(layer_of(name).is_some(), "src/lib.rs declares `{name}`, which tests/it/layers.rs does not place");
        }
    }
}

#[test]
fn a_module_that_reaches_up_or_across_fails_naming_the_file_and_the_import() {
    let files = BTreeMap::from([
        ("model/change.rs".to_owned(), "use crate::app::App;\n// crate::server in a comment is fine\n".to_owned()),
        ("api/posts.rs".to_owned(), "fn f() { crate::web::page(); }\nuse crate::app::AppState;\n".to_owned()),
        ("bench/mod.rs".to_owned(), "use crate::serve::shutdown_signal;\n".to_owned()),
        ("serve.rs".to_owned(), "use crate::bench::x;\n".to_owned()),
        ("store/mod.rs".to_owned(), "use crate::store::x; use crate::model::Post;\n".to_owned()),
    ]);
    assert_eq!(
        violations(&files),
        [
            "src/api/posts.rs:1: `api` uses `crate::web`, a sibling in its layer",
            "src/model/change.rs:1: `model` uses `crate::app`, a higher layer",
            "src/serve.rs:1: `serve` uses `crate::bench`, a higher layer",
        ]
    );
}
