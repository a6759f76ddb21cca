//! A small real filesystem for tests that fill a disk: an ext4 image, loop-mounted (root or
//! CAP_SYS_ADMIN). Unmounted and removed on drop; drop the broker using it first.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct LoopDisk {
    pub mount: PathBuf,
    _tmp: tempfile::TempDir,
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl LoopDisk {
    /// An ext4 filesystem of `mib` MiB with no blocks reserved for root (the broker runs as
    /// root here, and reserved blocks would hide the full disk from it).
    pub fn new(mib: u64) -> LoopDisk {
        let tmp = tempfile::tempdir().expect("temp dir");
        let image = tmp.path().join("disk.img");
        let mount = tmp.path().join("mnt");
        std::fs::create_dir(&mount).unwrap();
        let file = std::fs::File::create(&image).unwrap();
        file.set_len(mib << 20).unwrap();
        drop(file);
        let image_arg = image.to_str().unwrap();
        run("mkfs.ext4", &["-q", "-F", "-m", "0", image_arg]).expect("mkfs.ext4 (e2fsprogs)");
        run("mount", &["-o", "loop", image_arg, mount.to_str().unwrap()])
            .expect("loop-mounting a test filesystem needs root or CAP_SYS_ADMIN");
        LoopDisk { mount, _tmp: tmp }
    }

    pub fn free_bytes(&self) -> u64 {
        free_bytes(&self.mount)
    }

    /// Takes all but `leave` bytes of the free space with a file (returned, to free it later).
    pub fn fill_leaving(&self, leave: u64) -> PathBuf {
        let path = self.mount.join("filler");
        let free = self.free_bytes();
        assert!(free > leave, "{free} bytes free, cannot leave {leave}");
        let file = std::fs::File::create(&path).unwrap();
        // SAFETY: fallocate on a descriptor we own.
        let rc = unsafe {
            libc::fallocate(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
                0,
                (free - leave) as libc::off_t,
            )
        };
        assert_eq!(rc, 0, "fallocate: {}", std::io::Error::last_os_error());
        file.sync_all().unwrap();
        path
    }
}

pub fn free_bytes(path: &Path) -> u64 {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: statvfs fills the struct we pass.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut st), 0);
        st.f_bavail * st.f_frsize
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        let mount = self.mount.to_str().unwrap().to_string();
        for _ in 0..50 {
            if run("umount", &[&mount]).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        // Still busy (a process the test could not stop): detach it so the image can go.
        let _ = run("umount", &["-l", &mount]);
    }
}
