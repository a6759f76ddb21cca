//! One dependency direction in `src/`: each module uses only the layers below it.
//!
//! ```text
//! server (sockets)  →  handlers (one file per API)  →  services (groups, transactions,
//! controller, replication, metrics)  →  shard (the per-core context)  →  cluster (the handle to the
//! ZooKeeper control thread)  →  metadata, config, protocol  →  ferrite_shards
//! ```
//!
//! A module that names `crate::<module>` of a layer above its own fails this test, with the
//! file and line. `main.rs`, `cli.rs`, `tune/` and `users.rs` are the binary's entry points and may use
//! anything. (In the spirit of TigerBeetle's tidy checks: a rule that holds only while a test
//! says so.)

use std::path::{Path, PathBuf};

/// The layers, top first; modules in one layer may use each other.
const LAYERS: &[&[&str]] = &[
    &["server"],
    &["handlers"],
    &[
        "groups",
        "transactions",
        "controller",
        "replication",
        "metrics",
    ],
    &["shard"],
    &["cluster"],
    &["metadata", "config", "protocol", "security"],
];

/// Modules outside the layering: the binary's entry points.
const ENTRY_POINTS: &[&str] = &["main", "cli", "tune", "users", "acls"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    Path::new(first)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Whether `file` is its module's root (`src/<m>.rs` or `src/<m>/mod.rs`): there `super::`
/// is the crate itself.
fn is_module_root(src: &Path, file: &Path) -> bool {
    let depth = file.strip_prefix(src).unwrap().components().count();
    depth == 1 || (depth == 2 && file.file_name().is_some_and(|n| n == "mod.rs"))
}

/// Every top-level module a line of code names through `prefix` (comments left out).
fn paths_after(line: &str, prefix: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or_default();
    code.match_indices(prefix)
        .filter(|(at, _)| {
            // `super::` inside `crate::x::super::` or `self::super::` is not the crate's.
            !code[..*at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        })
        .map(|(at, m)| {
            code[at + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

fn crate_paths(line: &str) -> Vec<String> {
    paths_after(line, "crate::")
}

/// The lines of `src/` that break the layering, and the modules placed in no layer.
fn check(src: &Path) -> (Vec<String>, Vec<String>) {
    let src = src.to_path_buf();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut unplaced = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if ENTRY_POINTS.contains(&module.as_str()) {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            unplaced.push(module);
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        let root = is_module_root(&src, file);
        for (n, line) in text.lines().enumerate() {
            let mut named = crate_paths(line);
            if root {
                named.extend(paths_after(line, "super::"));
            }
            for used in named {
                if let Some(theirs) = layer_of(&used) {
                    if theirs < own {
                        violations.push(format!(
                            "{}:{}: `{module}` uses `crate::{used}`, a layer above it",
                            file.strip_prefix(&src).unwrap().display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    unplaced.sort();
    unplaced.dedup();
    (violations, unplaced)
}

#[test]
fn no_module_uses_a_layer_above_its_own() {
    let (violations, unplaced) = check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        unplaced.is_empty(),
        "modules not placed in a layer (add them to LAYERS): {unplaced:?}"
    );
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_check_finds_upward_uses_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("shard")).unwrap();
    std::fs::write(
        src.join("shard/mod.rs"),
        "use crate::metadata::X;\nuse super::handlers::errors; // crate::server only here\n",
    )
    .unwrap();
    std::fs::write(
        src.join("shard/routing.rs"),
        "use super::Shard;\nuse crate::groups;\n",
    )
    .unwrap();
    std::fs::write(src.join("nowhere.rs"), "").unwrap();
    let (violations, unplaced) = check(src);
    assert_eq!(violations.len(), 2, "{violations:?}");
    assert!(violations[0].contains("shard/mod.rs:2") && violations[0].contains("crate::handlers"));
    assert!(
        violations[1].contains("shard/routing.rs:2") && violations[1].contains("crate::groups")
    );
    assert_eq!(unplaced, ["nowhere"]);
}
