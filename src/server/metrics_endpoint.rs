//! The HTTP endpoint Prometheus scrapes (`--metrics HOST:PORT`, `GET /metrics`), on shard 0.
//!
//! Deliberately small: one request per connection, answered and closed; request heads beyond
//! 8 KiB or slower than 5 s are dropped. A scrape gathers every shard's series through the
//! router, so it costs each shard one call, never a lock on its hot path.

use crate::metrics::collect;
use crate::metrics::exposition::Exposition;
use crate::shard::Shard;
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::time::Duration;

const HEAD_BYTES_MAX: usize = 8 << 10;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves scrapes until the broker shuts down.
pub async fn serve(shard: Rc<Shard>, listener: TcpListener) {
    while let Some(stream) =
        super::accept_until_shutdown(&shard, &listener, "metrics endpoint").await
    {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            let answered = glommio::timer::timeout(REQUEST_TIMEOUT, answer(&shard, stream)).await;
            if let Err(e) = answered {
                tracing::debug!(error = %e, "metrics endpoint: request dropped");
            }
        })
        .detach();
    }
}

async fn answer(shard: &Rc<Shard>, mut stream: TcpStream) -> glommio::Result<(), ()> {
    let Some(head) = read_head(&mut stream).await? else {
        return Ok(());
    };
    let (status, content_type, body) = match request_line(&head) {
        Some(("GET", "/metrics")) => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            scrape(shard).await,
        ),
        Some(("GET", _)) => (
            "404 Not Found",
            "text/plain",
            "Ferrite serves metrics at /metrics\n".to_string(),
        ),
        Some(_) => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
        None => ("400 Bad Request", "text/plain", "bad request\n".into()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.close().await?;
    Ok(())
}

/// Every shard's series, merged by family.
async fn scrape(shard: &Rc<Shard>) -> String {
    let parts = shard
        .router()
        .broadcast(|s: Rc<Shard>| Box::pin(async move { collect::shard(&s) }))
        .await;
    let mut all = Exposition::default();
    for part in parts.into_iter().flatten() {
        all.merge(part);
    }
    all.render()
}

/// The request head up to the blank line; `None` when the peer closed or sent too much.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > HEAD_BYTES_MAX {
            return Ok(None);
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(Some(String::from_utf8_lossy(&head).into_owned()))
}

/// `GET /metrics HTTP/1.1` → ("GET", "/metrics"); a query string is ignored.
fn request_line(head: &str) -> Option<(&str, &str)> {
    let mut parts = head.lines().next()?.split_whitespace();
    let method = parts.next()?;
    let target = parts.next()?;
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    Some((method, target.split('?').next().unwrap_or(target)))
}

#[cfg(test)]
mod tests {
    use super::request_line;

    #[test]
    fn request_lines_parse() {
        assert_eq!(
            request_line("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some(("GET", "/metrics"))
        );
        assert_eq!(
            request_line("GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Some(("GET", "/metrics"))
        );
        assert_eq!(request_line("garbage\r\n\r\n"), None);
    }
}
