//! Clients that hang up on a server at a chosen moment of its reading, for the memory test and the bench: over raw
//! TCP, and with what the kernel says of this machine's connections (/proc/net/tcp).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The client ports on 127.0.0.1 whose every byte sent to the server at `server_port` the server process has read:
/// the client's socket has nothing unacknowledged (`tx_queue`) and the server's end has nothing unread
/// (`rx_queue`), from /proc/net/tcp. A client hangs up only then: had it closed earlier, the server would have seen
/// the end of the connection with the body and dropped the request before its create, which tests nothing.
pub fn read_in_full(server_port: u16) -> std::collections::HashSet<u16> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    // Per client port: (client tx_queue, server rx_queue), of established connections.
    let mut queues: std::collections::HashMap<u16, (Option<u64>, Option<u64>)> = Default::default();
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(remote), Some(&"01"), Some(q)) = (f.get(1), f.get(2), f.get(3), f.get(4))
        else {
            continue;
        };
        let port = |a: &str| {
            a.split_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
        };
        let (Some(lport), Some(rport), Some((tx, rx))) = (port(local), port(remote), q.split_once(':'))
        else {
            continue;
        };
        let (Ok(tx), Ok(rx)) = (u64::from_str_radix(tx, 16), u64::from_str_radix(rx, 16)) else {
            continue;
        };
        if rport == server_port {
            queues.entry(lport).or_default().0 = Some(tx);
        } else if lport == server_port {
            queues.entry(rport).or_default().1 = Some(rx);
        }
    }
    queues
        .into_iter()
        .filter(|(_, q)| *q == (Some(0), Some(0)))
        .map(|(p, _)| p)
        .collect()
}

/// Once the server has read a client's whole body, how long the client still waits before hanging up: the handler
/// verifies it and hands its create to the (held) writer in the same poll as the last read, in milliseconds. No
/// answer can come before the writer is let go.
pub const HAND_OVER: Duration = Duration::from_millis(100);

/// What became of one attempt.
pub enum Attempt {
    /// The server read the whole body and did not answer: the client hung up.
    HungUp,
    /// The server answered (the status line's code), or cut the connection off (0).
    Answered(u16),
}

/// Reads until the status line is complete (kept in `buf` across cancellations); its code, or 0 if the
/// connection ended first.
async fn status_line(stream: &mut TcpStream, buf: &mut Vec<u8>) -> u16 {
    let mut part = [0u8; 1024];
    while !buf.windows(2).any(|w| w == b"\r\n") {
        match stream.read(&mut part).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&part[..n]),
        }
    }
    String::from_utf8_lossy(buf)
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// One delivery over raw TCP: the head and the body, then, once the server has read all of it (`read` is the
/// latest [`read_in_full`]) and [`HAND_OVER`] has passed without an answer, a hang-up.
pub async fn attempt(
    addr: SocketAddr,
    head: &[u8],
    body: &[u8],
    mut read: tokio::sync::watch::Receiver<Arc<std::collections::HashSet<u16>>>,
) -> Attempt {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return Attempt::Answered(0);
    };
    let Ok(port) = stream.local_addr().map(|a| a.port()) else {
        return Attempt::Answered(0);
    };
    let mut buf = Vec::new();
    let sent = stream.write_all(head).await.is_ok() && stream.write_all(body).await.is_ok();
    if !sent {
        // Refused before the body was all read (the bound): the answer, if it got out before the close.
        let status = tokio::time::timeout(Duration::from_secs(5), status_line(&mut stream, &mut buf)).await;
        return Attempt::Answered(status.unwrap_or(0));
    }
    let read_by_server = async {
        loop {
            if read.borrow_and_update().contains(&port) {
                return;
            }
            if read.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::select! {
            status = status_line(&mut stream, &mut buf) => Some(status),
            () = read_by_server => None,
        }
    })
    .await;
    match waited {
        Ok(Some(status)) => Attempt::Answered(status),
        Ok(None) => match tokio::time::timeout(HAND_OVER, status_line(&mut stream, &mut buf)).await {
            Ok(status) => Attempt::Answered(status),
            // Dropping the stream closes the connection.
            Err(_) => Attempt::HungUp,
        },
        Err(_) => Attempt::Answered(0),
    }
}
