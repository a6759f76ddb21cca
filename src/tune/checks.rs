//! What `ferrite tune --check` looks at, each check reading the host as it is: current value,
//! recommended value, and why. Nothing here changes the host.

use std::path::{Path, PathBuf};

/// How a check came out.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// The host should change.
    Change,
    /// The value could not be read (not exposed here, or no permission).
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Check {
    pub name: String,
    pub current: String,
    pub recommended: String,
    pub why: &'static str,
    pub verdict: Verdict,
}

fn read(path: impl AsRef<Path>) -> Result<String, String> {
    let path = path.as_ref();
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => {
                format!("cannot read {} (no permission)", path.display())
            }
            std::io::ErrorKind::NotFound => {
                format!("{} is not exposed on this host", path.display())
            }
            _ => format!("cannot read {}: {e}", path.display()),
        })
}

fn check(
    name: impl Into<String>,
    current: Result<String, String>,
    recommended: &str,
    why: &'static str,
    ok: impl Fn(&str) -> bool,
) -> Check {
    let (current, verdict) = match current {
        Ok(v) => {
            let verdict = if ok(&v) { Verdict::Ok } else { Verdict::Change };
            (v, verdict)
        }
        Err(e) => (e, Verdict::Unknown),
    };
    Check {
        name: name.into(),
        current,
        recommended: recommended.to_string(),
        why,
        verdict,
    }
}

/// The selected value of a sysfs multiple-choice file such as `always [madvise] never`.
fn selected(text: &str) -> String {
    text.split_whitespace()
        .find(|w| w.starts_with('['))
        .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
        .unwrap_or_else(|| text.to_string())
}

pub fn cpu_governors(cores: &[usize]) -> Vec<Check> {
    cores
        .iter()
        .map(|c| {
            check(
                format!("cpu{c} frequency governor"),
                read(format!(
                    "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
                )),
                "performance",
                "a shard core that clocks down adds latency to every request it serves",
                |v| v == "performance",
            )
        })
        .collect()
}

pub fn aio_max_nr() -> Check {
    check(
        "fs.aio-max-nr",
        read("/proc/sys/fs/aio-max-nr"),
        ">= 1048576",
        "each shard's io_uring and AIO contexts draw on this system-wide limit",
        |v| v.parse::<u64>().is_ok_and(|n| n >= 1_048_576),
    )
}

pub fn memlock() -> Check {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we own.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } == 0;
    let current = if !got {
        Err("getrlimit(RLIMIT_MEMLOCK) failed".to_string())
    } else if limit.rlim_cur == libc::RLIM_INFINITY {
        Ok("unlimited".to_string())
    } else {
        Ok(format!("{} KiB", limit.rlim_cur / 1024))
    };
    check(
        "memlock limit (this process)",
        current,
        "unlimited (LimitMEMLOCK=infinity)",
        "io_uring rings and registered buffers are locked memory; at 8 MiB each shard's ring stays small",
        |v| v == "unlimited",
    )
}

pub fn transparent_hugepages() -> Check {
    check(
        "transparent hugepages",
        read("/sys/kernel/mm/transparent_hugepage/enabled").map(|t| selected(&t)),
        "madvise (or never)",
        "with `always`, compaction and khugepaged stalls land on shard threads at random",
        |v| v == "madvise" || v == "never",
    )
}

pub fn swappiness() -> Check {
    check(
        "vm.swappiness",
        read("/proc/sys/vm/swappiness"),
        "1",
        "a broker's memory is its caches and buffers; swapping them out turns hits into disk reads",
        |v| v.parse::<u32>().is_ok_and(|n| n <= 1),
    )
}

pub fn clocksource() -> Check {
    check(
        "clocksource",
        read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "tsc",
        "timestamps, timers and latency histograms read the clock millions of times a second",
        |v| v == "tsc",
    )
}

/// The block device (whole disk) holding `dir`, as its `/sys/block/<name>` directory.
pub fn block_device_of(dir: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let link = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let real = std::fs::canonicalize(&link)
        .map_err(|_| format!("{} is on device {major}:{minor}, which has no block queue (overlay, tmpfs or network fs)", dir.display()))?;
    // A partition's queue is its disk's: the parent directory when `partition` exists.
    if real.join("partition").exists() {
        real.parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| "partition without a disk".to_string())
    } else {
        Ok(real)
    }
}

pub fn disk(dir: &Path) -> Vec<Check> {
    let device = block_device_of(dir);
    let name = device
        .as_ref()
        .ok()
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "data disk".to_string());
    let queue = |file: &str| {
        device
            .clone()
            .and_then(|d| read(d.join("queue").join(file)))
    };
    vec![
        check(
            format!("{name} I/O scheduler"),
            queue("scheduler").map(|t| selected(&t)),
            "none (NVMe, virtio) or mq-deadline",
            "each shard already orders and batches its own writes; a reordering scheduler adds latency",
            |v| v == "none" || v == "mq-deadline",
        ),
        check(
            format!("{name} write cache"),
            queue("write_cache"),
            "write back with flushes honoured (or write through on power-protected storage)",
            "fdatasync must reach stable storage: know whether the device caches writes",
            |v| v == "write back" || v == "write through",
        ),
    ]
}

/// IRQs of NIC and disk queues (by name in /proc/interrupts) and whether any may land on a
/// shard core: a shard interrupted for another device's completions loses its timeslice.
pub fn irq_affinity(shard_cores: &[usize]) -> Vec<Check> {
    let table = match read("/proc/interrupts") {
        Ok(t) => t,
        Err(e) => {
            return vec![check("IRQ affinity", Err(e), "", "", |_| true)];
        }
    };
    // Queue interrupts only: virtio-net `input.N`/`output.N`, virtio-blk `req.N`, NVMe, and
    // the usual NIC drivers; not config or balloon interrupts.
    let device_irq = |line: &str| {
        let Some(name) = line.split_whitespace().last() else {
            return false;
        };
        let n = name.to_ascii_lowercase();
        let virtio_queue = n.starts_with("virtio")
            && ["-input.", "-output.", "-req.", "-rx", "-tx"]
                .iter()
                .any(|q| n.contains(q));
        let driver = [
            "nvme", "eth", "ens", "enp", "mlx", "ixgbe", "i40e", "ena-", "ahci",
        ]
        .iter()
        .any(|d| n.starts_with(d));
        virtio_queue || driver
    };
    let mut out = Vec::new();
    for line in table.lines().filter(|l| device_irq(l)) {
        let Some((irq, rest)) = line.trim().split_once(':') else {
            continue;
        };
        let Ok(irq) = irq.trim().parse::<u32>() else {
            continue;
        };
        let device = rest.split_whitespace().last().unwrap_or("?").to_string();
        let affinity = read(format!("/proc/irq/{irq}/smp_affinity_list"));
        let cpus = affinity.as_deref().map(parse_cpu_list).unwrap_or_default();
        let on_shards = cpus.iter().any(|c| shard_cores.contains(c));
        let mut c = check(
            format!("IRQ {irq} ({device}) affinity"),
            affinity,
            "cores without shards (the control core), when the host has them",
            "device interrupts on a shard core steal time from the requests it serves",
            |_| !on_shards,
        );
        if c.verdict == Verdict::Change && cpus.iter().all(|c| shard_cores.contains(c)) {
            c.recommended =
                "a core that runs no shard (every core runs one here: use fewer --cores)".into();
        }
        out.push(c);
    }
    if out.is_empty() {
        out.push(check(
            "IRQ affinity",
            Err("no NIC or disk queue IRQs found in /proc/interrupts".into()),
            "",
            "",
            |_| true,
        ));
    }
    out
}

/// `0-2,5` → [0, 1, 2, 5].
pub fn parse_cpu_list(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.trim().parse::<usize>().ok()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_choices_and_cpu_lists_parse() {
        assert_eq!(selected("always [madvise] never"), "madvise");
        assert_eq!(selected("[none] mq-deadline"), "none");
        assert_eq!(parse_cpu_list("0-2,5"), vec![0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("3"), vec![3]);
    }
}
