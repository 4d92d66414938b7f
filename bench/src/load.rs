//! The load generator: keep-alive HTTP/1.1 connections over raw TCP to 127.0.0.1 (a client as light as it can be,
//! since it shares the machine with the server), every request a Stripe-signed event signed at send time.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inbox_core::schemes::{Identity, Key, Scheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Makes event `i` of a run: a realistic Stripe event JSON body of 1–4 KiB with id `evt_{prefix}_{i}`, signed now.
pub struct EventGen {
    prefix: String,
    key: Key,
    generation: AtomicU64,
}

impl EventGen {
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            key: Scheme::Stripe
                .key_from_secret(crate::SECRET)
                .expect("a valid secret"),
            generation: AtomicU64::new(0),
        }
    }

    /// A generator of ids never used before (same secret).
    pub fn fresh(self: Arc<Self>) -> Arc<Self> {
        let g = self.generation.fetch_add(1, Ordering::Relaxed);
        Arc::new(Self::new(&format!("{}{g}", self.prefix)))
    }

    pub fn body(&self, i: u64) -> String {
        // 1 KiB to 4 KiB, spread over the range by a cheap hash of i.
        let target = 1024 + (i.wrapping_mul(2_654_435_761) % 3072) as usize;
        let id = format!("evt_{}_{i}", self.prefix);
        let mut items = String::new();
        let mut n = 0u64;
        let head = format!(
            "{{\"id\":\"{id}\",\"object\":\"event\",\"api_version\":\"2024-06-20\",\"created\":{},\
             \"type\":\"payment_intent.succeeded\",\"livemode\":false,\"pending_webhooks\":1,\
             \"request\":{{\"id\":\"req_{i:x}\",\"idempotency_key\":\"{i:016x}-bench\"}},\
             \"data\":{{\"object\":{{\"id\":\"pi_{i:x}\",\"object\":\"payment_intent\",\"amount\":{},\
             \"currency\":\"usd\",\"customer\":\"cus_{:x}\",\"status\":\"succeeded\",\"line_items\":[",
            1_796_018_400 + i,
            (i % 100_000) + 100,
            i / 7
        );
        let tail = "]}}}";
        while head.len() + items.len() + tail.len() < target {
            if n > 0 {
                items.push(',');
            }
            items.push_str(&format!(
                "{{\"id\":\"li_{i:x}_{n}\",\"object\":\"item\",\"amount_total\":{},\"quantity\":{},\
                 \"description\":\"Widget model {} for order {}\",\"price\":{{\"id\":\"price_{:x}\",\"unit_amount\":{}}}}}",
                (n * 1337 + i) % 50_000,
                n % 5 + 1,
                n,
                i,
                n * 31 + 7,
                (n * 97) % 10_000
            ));
            n += 1;
        }
        format!("{head}{items}{tail}")
    }

    /// The whole HTTP request for event `i`, signed at this moment.
    pub fn request(&self, i: u64) -> Vec<u8> {
        let body = self.body(i);
        let now = inbox_core::time::now_ms() / 1000;
        let identity = Identity {
            event_id: format!("evt_{}_{i}", self.prefix),
            event_type: None,
        };
        let mut req = format!(
            "POST /webhooks/stripe HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        );
        for (name, value) in Scheme::Stripe.sign(&self.key, body.as_bytes(), &identity, now) {
            req.push_str(name.as_str());
            req.push_str(": ");
            req.push_str(value.to_str().unwrap_or(""));
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        req.push_str(&body);
        req.into_bytes()
    }
}

#[derive(Default)]
pub struct Stats {
    pub ok: u64,
    pub errors: u64,
    pub statuses: HashMap<u16, u64>,
    pub latencies_us: Vec<u32>,
    pub elapsed: Duration,
}

impl Stats {
    /// Answered requests per second (any status).
    pub fn rate(&self) -> f64 {
        self.latencies_us.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        let mut v = self.latencies_us.clone();
        v.sort_unstable();
        let idx = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        v[idx.min(v.len() - 1)] as f64 / 1000.0
    }

    fn merge(&mut self, other: Stats) {
        self.ok += other.ok;
        self.errors += other.errors;
        for (s, n) in other.statuses {
            *self.statuses.entry(s).or_default() += n;
        }
        self.latencies_us.extend(other.latencies_us);
    }
}

/// One keep-alive connection.
struct Conn {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
}

impl Conn {
    /// Sends one request and reads its answer; returns the status.
    async fn exchange(&mut self, request: &[u8]) -> std::io::Result<u16> {
        if self.stream.is_none() {
            let s = TcpStream::connect(self.addr).await?;
            s.set_nodelay(true)?;
            self.stream = Some(s);
            self.buf.clear();
        }
        let result = self.exchange_on(request).await;
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    async fn exchange_on(&mut self, request: &[u8]) -> std::io::Result<u16> {
        let stream = self.stream.as_mut().expect("connected");
        stream.write_all(request).await?;
        let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_owned());
        let mut chunk = [0u8; 8192];
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.buf[..end]).map_err(|_| bad("head"))?;
                let status: u16 = head
                    .get(9..12)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad("status"))?;
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (n, v) = l.split_once(':')?;
                        n.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .ok_or_else(|| bad("no content-length"))?;
                let total = end + 4 + len;
                while self.buf.len() < total {
                    let n = stream.read(&mut chunk).await?;
                    if n == 0 {
                        return Err(bad("closed"));
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                }
                self.buf.drain(..total);
                return Ok(status);
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(bad("closed"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// `conns` connections each sending the next event as soon as its previous answer came, until `max` requests
/// were sent or `limit` passed.
pub async fn closed_loop(
    addr: SocketAddr,
    conns: usize,
    limit: Duration,
    max: u64,
    gen: Arc<EventGen>,
) -> Stats {
    run(addr, conns, limit, max, None, gen).await
}

/// Open loop at `rate` requests/s for `limit`: request i is due at start + i/rate, and its latency counts from
/// then (so waiting for a free connection counts too).
pub async fn open_loop(
    addr: SocketAddr,
    conns: usize,
    rate: f64,
    limit: Duration,
    gen: Arc<EventGen>,
) -> Stats {
    let max = (rate * limit.as_secs_f64()).ceil() as u64;
    run(addr, conns, limit + Duration::from_secs(10), max, Some(rate), gen).await
}

async fn run(
    addr: SocketAddr,
    conns: usize,
    limit: Duration,
    max: u64,
    rate: Option<f64>,
    gen: Arc<EventGen>,
) -> Stats {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (next, gen) = (next.clone(), gen.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn {
                addr,
                stream: None,
                buf: Vec::with_capacity(16 * 1024),
            };
            let mut stats = Stats::default();
            loop {
                if start.elapsed() >= limit {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= max {
                    break;
                }
                let due = match rate {
                    Some(r) => {
                        let due = start + Duration::from_secs_f64(i as f64 / r);
                        tokio::time::sleep_until(due.into()).await;
                        due
                    }
                    None => Instant::now(),
                };
                let request = gen.request(i);
                match tokio::time::timeout(Duration::from_secs(30), conn.exchange(&request)).await {
                    Ok(Ok(status)) => {
                        let us = due.elapsed().as_micros().min(u32::MAX as u128) as u32;
                        stats.latencies_us.push(us);
                        *stats.statuses.entry(status).or_default() += 1;
                        if status == 200 {
                            stats.ok += 1;
                        }
                    }
                    _ => {
                        conn.stream = None;
                        stats.errors += 1;
                    }
                }
            }
            stats
        }));
    }
    let mut total = Stats::default();
    for t in tasks {
        if let Ok(s) = t.await {
            total.merge(s);
        }
    }
    total.elapsed = start.elapsed();
    total
}
