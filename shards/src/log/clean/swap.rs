//! Replacing a run of segments with their cleaned version, so that a crash at any point leaves
//! either the old segments or the new one, never a mix.
//!
//! 1. The cleaned segment is written beside the old ones as `<base>.log.cleaned` (and its
//!    `.index.cleaned`, `.timeindex.cleaned`), fdatasynced.
//! 2. The manifest `cleaner-swap` (new base, then every replaced base) is written atomically:
//!    from here the swap is decided.
//! 3. The cleaned files are renamed over `<base>.*`, the other replaced segments unlinked, the
//!    directory synced, and the manifest removed (and the directory synced again, so a replay
//!    cannot meet a segment created later with a replaced base).
//!
//! On open, `recover` replays step 3 if a manifest is there, and removes `.cleaned` files a
//! crash left without one.

use super::super::segment::SegmentPaths;
use crate::error::{Error, Result};
use crate::uring;
use std::path::{Path, PathBuf};

pub(crate) const MANIFEST: &str = "cleaner-swap";
const CLEANED_SUFFIX: &str = ".cleaned";

/// The paths a cleaned segment is written to before the swap.
pub(crate) fn cleaned_paths(dir: &Path, base: i64) -> SegmentPaths {
    let final_paths = SegmentPaths::new(dir, base);
    SegmentPaths {
        log: with_suffix(&final_paths.log),
        index: with_suffix(&final_paths.index),
        time_index: with_suffix(&final_paths.time_index),
        txn_index: with_suffix(&final_paths.txn_index),
    }
}

fn with_suffix(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(CLEANED_SUFFIX);
    PathBuf::from(s)
}

/// Step 2: decides that `base`'s cleaned files replace the segments at `replaced` (which
/// include it).
pub(crate) async fn decide(dir: &Path, base: i64, replaced: &[i64]) -> Result<()> {
    let manifest = dir.join(MANIFEST);
    let mut text = format!("{base}\n");
    for b in replaced {
        text.push_str(&format!("{b}\n"));
    }
    uring::write_atomically(&manifest, text.into_bytes())
        .await
        .map_err(|e| Error::io("write cleaner manifest", &manifest, e))
}

/// Step 3, after `decide` (and on open, after a crash).
pub(crate) async fn finish(dir: &Path, base: i64, replaced: &[i64]) -> Result<()> {
    let cleaned = cleaned_paths(dir, base);
    let target = SegmentPaths::new(dir, base);
    // Any order will do: a crash here replays the manifest before anything opens these files.
    for (from, to) in [
        (&cleaned.index, &target.index),
        (&cleaned.time_index, &target.time_index),
        (&cleaned.txn_index, &target.txn_index),
        (&cleaned.log, &target.log),
    ] {
        match uring::rename(from, to).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("rename", from, e)),
        }
    }
    for &old in replaced.iter().filter(|&&b| b != base) {
        let paths = SegmentPaths::new(dir, old);
        for p in paths.all() {
            match uring::unlink(p).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("unlink", p, e)),
            }
        }
    }
    sync(dir).await?;
    let manifest = dir.join(MANIFEST);
    uring::unlink(&manifest)
        .await
        .map_err(|e| Error::io("unlink", &manifest, e))?;
    sync(dir).await
}

async fn sync(dir: &Path) -> Result<()> {
    uring::sync_dir(dir)
        .await
        .map_err(|e| Error::io("sync directory", dir, e))
}

/// On open, before segments are listed: completes a decided swap, drops an undecided one.
pub(crate) async fn recover(dir: &Path) -> Result<()> {
    let manifest = dir.join(MANIFEST);
    if let Ok(file) = uring::File::open_read(&manifest).await {
        let bytes = file
            .read_at(0, 1 << 20)
            .await
            .map_err(|e| Error::io("read", &manifest, e))?;
        let bases: Option<Vec<i64>> = std::str::from_utf8(&bytes)
            .ok()
            .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect());
        match bases.as_deref() {
            Some([base, replaced @ ..]) => {
                tracing::info!(log = %dir.display(), base, "completing a cleaner swap after a restart");
                finish(dir, *base, replaced).await?;
            }
            // write_atomically never leaves a partial manifest; an empty one decides nothing.
            _ => {
                let _ = uring::unlink(&manifest).await;
            }
        }
    }
    recover_leftovers(dir).await
}

/// Removes `.cleaned` files of an unfinished run; never while a swap is decided but not done
/// (its manifest still there), since that swap needs them.
pub(crate) async fn recover_leftovers(dir: &Path) -> Result<()> {
    if uring::File::open_read(&dir.join(MANIFEST)).await.is_ok() {
        return Ok(());
    }
    // Listing a directory has no io_uring operation; this runs when the partition opens and
    // after a pass that stopped early.
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .ends_with(CLEANED_SUFFIX)
        {
            let path = entry.path();
            tracing::info!(file = %path.display(), "removing an unfinished cleaned segment");
            uring::unlink(&path)
                .await
                .map_err(|e| Error::io("unlink", &path, e))?;
        }
    }
    Ok(())
}
