//! What one broker process owns alone: its data directory and the addresses it listens on.
//! Both are claimed before anything is opened, created or registered, so a second process
//! started by mistake exits (status 2) having changed nothing.
//!
//! - The data directory: an exclusive `flock` on `<data-dir>/.lock`, held for the life of the
//!   process (Kafka's `.lock` in each log directory). The holder writes its pid into the file,
//!   so the refusal can name it. The kernel drops the lock when the process dies, however it dies.
//! - The Kafka listener: the shards each bind it with SO_REUSEPORT (the kernel spreads
//!   connections over the cores), and SO_REUSEPORT lets any process of the same user join the
//!   group. So first the address is probed with a plain exclusive bind, which fails while anyone
//!   listens there, SO_REUSEPORT or not. The probe and the shards' binds are made one step among
//!   Ferrite processes by an abstract Unix socket named after the address: only one process can
//!   bind that name, and it goes away with the process, so two brokers started at the same
//!   instant cannot both pass the probe.
//! - The metrics endpoint has a single listener: it is bound here, exclusively, and handed to
//!   shard 0.
//!
//! After kill -9 a dead broker's listening sockets outlive it by some milliseconds (the kernel
//! tears the io_uring down asynchronously). A restart at once would join them and lose the
//! connections the kernel hands to them, so a busy address is retried for `BIND_RETRY` before
//! it counts as taken.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a busy address is retried: long enough for a killed broker's sockets to go, short
/// enough that a second broker started by mistake is told at once.
const BIND_RETRY: Duration = Duration::from_secs(2);
const BIND_RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Why this process may not run as a broker here; each names what is taken.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("data directory {dir} is in use by another ferrite process ({holder})")]
    DataDirInUse { dir: PathBuf, holder: String },
    #[error("{what} {addr}: address already in use")]
    AddressInUse {
        what: &'static str,
        addr: SocketAddr,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClaimError {
    let what = what.into();
    move |source| ClaimError::Io { what, source }
}

/// Everything claimed, held until the process exits.
pub struct Claims {
    _data_dir: File,
    _listen: Vec<UnixDatagram>,
    /// The metrics endpoint's listener, for shard 0 to serve.
    pub metrics: Option<TcpListener>,
}

/// Claims the data directory, every listener's address and the metrics address. A missing data
/// directory is created (as Kafka does), but only once both addresses are claimed, so a refused
/// start leaves nothing behind; an existing one is locked first, so a second broker on it is
/// told so at once.
pub fn take(
    data_dir: &Path,
    listen: &[SocketAddr],
    metrics: Option<SocketAddr>,
) -> Result<Claims, ClaimError> {
    let existing = data_dir
        .is_dir()
        .then(|| lock_data_dir(data_dir))
        .transpose()?;
    let mut listen_claims = Vec::with_capacity(listen.len());
    for &addr in listen {
        listen_claims.extend(claim_listen_address(addr)?);
    }
    let metrics = metrics.map(bind_metrics).transpose()?;
    let lock = match existing {
        Some(lock) => lock,
        None => lock_data_dir(data_dir)?,
    };
    Ok(Claims {
        _data_dir: lock,
        _listen: listen_claims,
        metrics,
    })
}

/// The data directory's exclusive lock (`.lock`), as a broker takes it; held while the file
/// is open.
pub fn lock_data_dir(dir: &Path) -> Result<File, ClaimError> {
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let path = dir.join(".lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(format!("opening {}", path.display())))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(io(format!("locking {}", path.display()))(e));
        }
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = match holder.trim().parse::<u32>() {
            Ok(pid) => format!("pid {pid}"),
            Err(_) => "pid not yet written".to_string(),
        };
        return Err(ClaimError::DataDirInUse {
            dir: dir.to_path_buf(),
            holder,
        });
    }
    let write_pid = |f: &mut File| -> std::io::Result<()> {
        f.set_len(0)?;
        f.rewind()?;
        writeln!(f, "{}", std::process::id())?;
        f.sync_data()
    };
    write_pid(&mut file).map_err(io(format!("writing {}", path.display())))?;
    Ok(file)
}

/// Retries `attempt` while it fails with "address in use", for `BIND_RETRY`.
fn retry_while_busy<T>(
    what: &'static str,
    addr: SocketAddr,
    mut attempt: impl FnMut() -> std::io::Result<T>,
) -> Result<T, ClaimError> {
    let started = Instant::now();
    let deadline = started + BIND_RETRY;
    let mut busy = false;
    loop {
        match attempt() {
            Ok(v) => {
                if busy {
                    let waited_ms = started.elapsed().as_millis() as u64;
                    tracing::info!(%addr, waited_ms, "{what}: the address was busy, now free");
                }
                return Ok(v);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                if Instant::now() >= deadline {
                    return Err(ClaimError::AddressInUse { what, addr });
                }
                busy = true;
                std::thread::sleep(BIND_RETRY_PAUSE);
            }
            Err(e) => return Err(io(format!("{what} {addr}"))(e)),
        }
    }
}

/// The abstract-socket claim on `listen`, once nobody listens there. Port 0 (any free port)
/// cannot be taken by anyone else and is not claimed.
fn claim_listen_address(listen: SocketAddr) -> Result<Option<UnixDatagram>, ClaimError> {
    if listen.port() == 0 {
        return Ok(None);
    }
    let name = format!("ferrite/listen/{listen}");
    let claim = retry_while_busy("listening on", listen, || {
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        UnixDatagram::bind_addr(&addr)
    })?;
    retry_while_busy("listening on", listen, || probe(listen))?;
    Ok(Some(claim))
}

/// An exclusive bind (no SO_REUSEPORT), closed at once: it fails while any socket listens on
/// `addr`. SO_REUSEADDR lets it pass connections left in TIME_WAIT by a previous broker, whose
/// sockets carry SO_REUSEADDR too (see `shard_listener`).
fn probe(addr: SocketAddr) -> std::io::Result<()> {
    let domain = socket2::Domain::for_address(addr);
    let socket = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())
}

/// One shard's Kafka listener: SO_REUSEPORT so every shard binds the address, and SO_REUSEADDR
/// as well, because connections accepted from it inherit the flag. glommio's own `bind` sets
/// only SO_REUSEPORT; a connection it accepted and a kill -9 closed then sits in TIME_WAIT
/// without SO_REUSEADDR for a minute, and the next start's exclusive `probe` fails on it.
pub fn shard_listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let domain = socket2::Domain::for_address(addr);
    let socket = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// The accept queue of each shard's listener (glommio's own choice).
const LISTEN_BACKLOG: i32 = 1024;

/// The metrics listener, bound exclusively (std sets SO_REUSEADDR, never SO_REUSEPORT).
fn bind_metrics(addr: SocketAddr) -> Result<TcpListener, ClaimError> {
    let listener = retry_while_busy("metrics endpoint on", addr, || TcpListener::bind(addr))?;
    listener
        .set_nonblocking(true)
        .map_err(io(format!("metrics endpoint on {addr}")))?;
    Ok(listener)
}
