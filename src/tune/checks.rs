//! What `ferrite tune` looks at, each check reading the host as it is: current value,
//! recommended value, why, and for a value that should change, what `--apply` would do about
//! it. Nothing here changes the host.

use std::path::{Path, PathBuf};

/// Where /proc and /sys are: `/` on a host, a fake tree in tests. Every path a check reads, and
/// so every path `--apply` writes, goes through `path`, so a fake tree runs the host's code.
#[derive(Clone, Debug)]
pub struct Root(PathBuf);

impl Root {
    pub fn new(dir: PathBuf) -> Root {
        Root(dir)
    }

    /// `absolute` (a /proc or /sys path) under this root.
    pub fn path(&self, absolute: &str) -> PathBuf {
        debug_assert!(absolute.starts_with('/'), "{absolute} is not absolute");
        self.0.join(absolute.trim_start_matches('/'))
    }
}

/// How a check came out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// The host should change, and this is how.
    Change(Remedy),
    /// The value could not be read (not exposed here, or no permission).
    Unknown,
}

/// What `--apply` does about a value that should change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remedy {
    /// Write the recommended value into the file the check read.
    Write(FileWrite),
    /// Not something a file write does: why, and what the operator should do instead.
    Operator(String),
}

/// One value to write into one /proc or /sys file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileWrite {
    pub path: PathBuf,
    /// What the file holds now, in the form it takes back (the selected word of a choice file).
    pub original: String,
    pub value: String,
}

fn write(path: PathBuf, original: &str, value: &str) -> Remedy {
    Remedy::Write(FileWrite {
        path,
        original: original.to_string(),
        value: value.to_string(),
    })
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

/// A check of `current`: `ok` says whether it may stay, `remedy` (given the current value) what
/// `--apply` does when it may not.
fn check(
    name: impl Into<String>,
    current: Result<String, String>,
    recommended: &str,
    why: &'static str,
    ok: impl Fn(&str) -> bool,
    remedy: impl FnOnce(&str) -> Remedy,
) -> Check {
    let (current, verdict) = match current {
        Ok(v) => {
            let verdict = if ok(&v) {
                Verdict::Ok
            } else {
                Verdict::Change(remedy(&v))
            };
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

/// The choices a sysfs multiple-choice file offers: `[mq-deadline] kyber none` → all three.
fn choices(text: &str) -> Vec<&str> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
        .collect()
}

/// The scheduler `--apply` sets from what the disk offers: none, else mq-deadline.
fn scheduler_to_set(offered: &str) -> Option<&'static str> {
    let offered = choices(offered);
    ["none", "mq-deadline"]
        .into_iter()
        .find(|s| offered.contains(s))
}

pub fn cpu_governors(root: &Root, cores: &[usize]) -> Vec<Check> {
    cores
        .iter()
        .map(|c| {
            let path = root.path(&format!(
                "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
            ));
            check(
                format!("cpu{c} frequency governor"),
                read(&path),
                "performance",
                "a shard core that clocks down adds latency to every request it serves",
                |v| v == "performance",
                |v| write(path.clone(), v, "performance"),
            )
        })
        .collect()
}

pub fn aio_max_nr(root: &Root) -> Check {
    let path = root.path("/proc/sys/fs/aio-max-nr");
    check(
        "fs.aio-max-nr",
        read(&path),
        ">= 1048576",
        "each shard's io_uring and AIO contexts draw on this system-wide limit",
        |v| v.parse::<u64>().is_ok_and(|n| n >= 1_048_576),
        |v| write(path.clone(), v, "1048576"),
    )
}

/// The memlock limit of this process: a resource limit, not a file, so `--apply` only says
/// where to set it.
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
        |_| {
            Remedy::Operator(
                "a resource limit, not a file: set LimitMEMLOCK=infinity in the broker's unit \
                 (tuning/ferrite.service) or `memlock unlimited` for its user in \
                 /etc/security/limits.conf; it applies to processes started after"
                    .into(),
            )
        },
    )
}

pub fn transparent_hugepages(root: &Root) -> Check {
    let path = root.path("/sys/kernel/mm/transparent_hugepage/enabled");
    check(
        "transparent hugepages",
        read(&path).map(|t| selected(&t)),
        "madvise (or never)",
        "with `always`, compaction and khugepaged stalls land on shard threads at random",
        |v| v == "madvise" || v == "never",
        |v| write(path.clone(), v, "madvise"),
    )
}

pub fn swappiness(root: &Root) -> Check {
    let path = root.path("/proc/sys/vm/swappiness");
    check(
        "vm.swappiness",
        read(&path),
        "1",
        "a broker's memory is its caches and buffers; swapping them out turns hits into disk reads",
        |v| v.parse::<u32>().is_ok_and(|n| n <= 1),
        |v| write(path.clone(), v, "1"),
    )
}

pub fn clocksource(root: &Root) -> Check {
    let dir = "/sys/devices/system/clocksource/clocksource0";
    let path = root.path(&format!("{dir}/current_clocksource"));
    let available = root.path(&format!("{dir}/available_clocksource"));
    check(
        "clocksource",
        read(&path),
        "tsc",
        "timestamps, timers and latency histograms read the clock millions of times a second",
        |v| v == "tsc",
        |v| match read(&available) {
            Ok(list) if choices(&list).contains(&"tsc") => write(path.clone(), v, "tsc"),
            Ok(list) => Remedy::Operator(format!(
                "tsc is not offered here (available: {list}): the kernel found it unstable or \
                 the hypervisor hides it; keep {v}"
            )),
            Err(e) => Remedy::Operator(format!("whether tsc is offered is unknown: {e}")),
        },
    )
}

/// The block device (whole disk) holding `dir`, as its `/sys/block/<name>` directory.
pub fn block_device_of(root: &Root, dir: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let link = root.path(&format!("/sys/dev/block/{major}:{minor}"));
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

pub fn disk(root: &Root, dir: &Path) -> Vec<Check> {
    let device = block_device_of(root, dir);
    let name = device
        .as_ref()
        .ok()
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "data disk".to_string());
    let queue = |file: &str| device.clone().map(|d| d.join("queue").join(file));
    let scheduler_path = queue("scheduler");
    let offered = scheduler_path.clone().and_then(read);
    vec![
        check(
            format!("{name} I/O scheduler"),
            offered.as_deref().map(selected).map_err(Clone::clone),
            "none (NVMe, virtio) or mq-deadline",
            "each shard already orders and batches its own writes; a reordering scheduler adds latency",
            |v| v == "none" || v == "mq-deadline",
            |v| {
                let offered = offered.as_deref().unwrap_or_default();
                match (scheduler_to_set(offered), scheduler_path) {
                    (Some(s), Ok(path)) => write(path, v, s),
                    _ => Remedy::Operator(format!(
                        "this disk offers neither none nor mq-deadline ({offered}); build or \
                         load the mq-deadline module"
                    )),
                }
            },
        ),
        check(
            format!("{name} write cache"),
            queue("write_cache").and_then(read),
            "write back with flushes honoured (or write through on power-protected storage)",
            "fdatasync must reach stable storage: know whether the device caches writes",
            |v| v == "write back" || v == "write through",
            |_| {
                Remedy::Operator(
                    "not changed by Ferrite: whether a device caches writes is a hardware and \
                     durability decision (power-loss protection, the vendor's tools)"
                        .into(),
                )
            },
        ),
    ]
}

/// A check whose value could not be read at all, so there is nothing to compare.
fn unreadable(name: &str, reason: String) -> Check {
    Check {
        name: name.to_string(),
        current: reason,
        recommended: String::new(),
        why: "",
        verdict: Verdict::Unknown,
    }
}

/// IRQs of NIC and disk queues (by name in /proc/interrupts) and whether any may land on a
/// shard core: a shard interrupted for another device's completions loses its timeslice.
/// `--apply` moves them to the online cores that run no shard.
pub fn irq_affinity(root: &Root, shard_cores: &[usize]) -> Vec<Check> {
    let table = match read(root.path("/proc/interrupts")) {
        Ok(t) => t,
        Err(e) => return vec![unreadable("IRQ affinity", e)],
    };
    let spare: Result<Vec<usize>, String> =
        read(root.path("/sys/devices/system/cpu/online")).map(|online| {
            parse_cpu_list(&online)
                .into_iter()
                .filter(|c| !shard_cores.contains(c))
                .collect()
        });
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
        let path = root.path(&format!("/proc/irq/{irq}/smp_affinity_list"));
        let affinity = read(&path);
        let cpus = affinity.as_deref().map(parse_cpu_list).unwrap_or_default();
        let on_shards = cpus.iter().any(|c| shard_cores.contains(c));
        let recommended = match &spare {
            Ok(s) if s.is_empty() => {
                "a core that runs no shard (every core runs one here: use fewer --cores)"
            }
            _ => "cores without shards (the control core), when the host has them",
        };
        out.push(check(
            format!("IRQ {irq} ({device}) affinity"),
            affinity,
            recommended,
            "device interrupts on a shard core steal time from the requests it serves",
            |_| !on_shards,
            |v| match &spare {
                Ok(s) if !s.is_empty() => write(path.clone(), v, &format_cpu_list(s)),
                Ok(_) => Remedy::Operator(
                    "every online core runs a shard, so there is no other core to move it to: \
                     run the broker with fewer --cores, then apply again"
                        .into(),
                ),
                Err(e) => Remedy::Operator(format!("which cores are online is unknown: {e}")),
            },
        ));
    }
    if out.is_empty() {
        out.push(unreadable(
            "IRQ affinity",
            "no NIC or disk queue IRQs found in /proc/interrupts".into(),
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

/// [0, 1, 2, 5] → `0-2,5`, the form `smp_affinity_list` takes. `cpus` ascending.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    debug_assert!(
        cpus.windows(2).all(|w| w[0] < w[1]),
        "{cpus:?} not ascending"
    );
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        parts.push(if cpus[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", cpus[i])
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_choices_and_cpu_lists_parse() {
        assert_eq!(selected("always [madvise] never"), "madvise");
        assert_eq!(selected("[none] mq-deadline"), "none");
        assert_eq!(selected("madvise"), "madvise");
        assert_eq!(
            choices("[bfq] mq-deadline none"),
            vec!["bfq", "mq-deadline", "none"]
        );
        assert_eq!(parse_cpu_list("0-2,5"), vec![0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("3"), vec![3]);
    }

    #[test]
    fn cpu_lists_format_as_ranges_and_parse_back() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 5]), "0-2,5");
        assert_eq!(format_cpu_list(&[3]), "3");
        assert_eq!(format_cpu_list(&[1, 3, 4]), "1,3-4");
        assert_eq!(format_cpu_list(&[]), "");
        for cpus in [vec![0, 1, 2, 5], vec![7], vec![1, 3, 4, 9, 10, 11]] {
            assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)), cpus);
        }
    }

    #[test]
    fn scheduler_to_set_prefers_none_then_mq_deadline() {
        assert_eq!(
            scheduler_to_set("[bfq] mq-deadline kyber none"),
            Some("none")
        );
        assert_eq!(
            scheduler_to_set("[bfq] mq-deadline kyber"),
            Some("mq-deadline")
        );
        assert_eq!(scheduler_to_set("[bfq] kyber"), None);
    }

    /// A fake disk whose scheduler is bfq: the check asks for a change and the remedy writes
    /// `none` into the scheduler file of the disk under the root.
    #[test]
    fn disk_scheduler_remedy_writes_into_the_disk_queue_under_the_root() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let dev = std::fs::metadata(&data).unwrap().dev();
        let fake = tmp.path().join("root");
        let disk_dir = fake.join("sys/devices/virtual/block/fakedisk");
        std::fs::create_dir_all(disk_dir.join("queue")).unwrap();
        std::fs::write(disk_dir.join("queue/scheduler"), "[bfq] mq-deadline none\n").unwrap();
        std::fs::write(disk_dir.join("queue/write_cache"), "write back\n").unwrap();
        std::fs::create_dir_all(fake.join("sys/dev/block")).unwrap();
        let link = format!("{}:{}", libc::major(dev), libc::minor(dev));
        std::os::unix::fs::symlink(
            "../../devices/virtual/block/fakedisk",
            fake.join("sys/dev/block").join(link),
        )
        .unwrap();
        let root = Root::new(fake.canonicalize().unwrap());
        let checks = disk(&root, &data);
        assert_eq!(checks[0].name, "fakedisk I/O scheduler");
        assert_eq!(checks[0].current, "bfq");
        let expected = FileWrite {
            path: disk_dir.canonicalize().unwrap().join("queue/scheduler"),
            original: "bfq".into(),
            value: "none".into(),
        };
        assert_eq!(checks[0].verdict, Verdict::Change(Remedy::Write(expected)));
        assert_eq!(checks[1].verdict, Verdict::Ok);
    }
}
