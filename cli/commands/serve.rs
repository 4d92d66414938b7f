//! `inbox serve`: the embedded runtime, receiving webhooks and processing them.

use std::path::PathBuf;

use anyhow::Result;

use inbox_core::handlers::{http_client, Registry};

use crate::{load, shutdown_signal};

pub async fn run(
    config: PathBuf,
    listen: Option<std::net::SocketAddr>,
    data_dir: Option<PathBuf>,
) -> Result<()> {
    let mut config = load(&config)?;
    if let Some(listen) = listen {
        config.server.listen = listen;
    }
    if let Some(dir) = data_dir {
        config.server.data_dir = dir;
    }
    let on_listen = |addr| println!("inbox: listening on http://{addr}");
    inbox_core::serve::serve(config, Registry::new(http_client()), on_listen, shutdown_signal()).await?;
    Ok(())
}
