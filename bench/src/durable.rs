//! The durable ceiling: what this disk can make durable through the same HTTP stack, measured beside `inbox serve`
//! so that a slower or faster host moves both figures together. A bare axum server, in its own process like
//! `inbox serve`, that appends each request's body to one file and answers 200 only after a group `fdatasync`: one
//! writer thread takes every request waiting, writes their bodies, syncs once and answers them all. No parsing, no
//! index, no state machine: the least any receiver that answers after a durable write must do.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::mpsc;

use anyhow::{Context, Result};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// One request waiting for the writer: its body, and where to say it is durable.
type Waiting = (Bytes, oneshot::Sender<bool>);

/// Serves until killed, appending to `dir/bodies.log`; prints `listening on http://ADDR` when ready.
pub fn serve(dir: &Path) -> Result<()> {
    let path = dir.join("bodies.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    let (tx, rx) = mpsc::channel::<Waiting>();
    std::thread::Builder::new()
        .name("durable-writer".into())
        .spawn(move || writer(file, &rx))?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        println!("listening on http://{}", listener.local_addr()?);
        let app = Router::new()
            .route("/webhooks/{source}", post(append))
            .with_state(tx);
        axum::serve(listener, app).await?;
        Ok(())
    })
}

async fn append(State(tx): State<mpsc::Sender<Waiting>>, body: Bytes) -> StatusCode {
    let (done, durable) = oneshot::channel();
    if tx.send((body, done)).is_err() {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    match durable.await {
        Ok(true) => StatusCode::OK,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The group commit: block for the first request, take all that wait behind it, write, `fdatasync` once, answer.
fn writer(mut file: File, rx: &mpsc::Receiver<Waiting>) {
    let mut batch: Vec<Waiting> = Vec::with_capacity(256);
    let mut buffer: Vec<u8> = Vec::with_capacity(1 << 20);
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        // One write of the whole batch (length-prefixed bodies), then one sync.
        buffer.clear();
        for (body, _) in &batch {
            buffer.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
            buffer.extend_from_slice(body);
        }
        let durable = file.write_all(&buffer).and_then(|()| file.sync_data()).is_ok();
        for (_, done) in batch.drain(..) {
            let _ = done.send(durable);
        }
    }
}
