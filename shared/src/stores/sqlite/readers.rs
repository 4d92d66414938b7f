//! The read pool: a few read connections (query only, small page cache) that see the last commit and never take
//! the write lock.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::sql;
use crate::ports::StoreError;

/// Read connections; reads are short, and most of them come from the sweeper and operators.
pub(super) const READERS: usize = 4;
/// Each read connection's page cache, in KiB (`PRAGMA cache_size` takes a negative number for KiB).
const READER_CACHE_KIB: i64 = -512;

/// The read connections: WAL readers see the last commit and never block the writer.
pub(super) struct Readers {
    idle: Mutex<Vec<Connection>>,
    path: PathBuf,
    busy_timeout: Duration,
}

impl Readers {
    pub(super) fn open(path: &Path, n: usize, busy_timeout: Duration) -> Result<Self, StoreError> {
        let readers = Self {
            idle: Mutex::new(Vec::with_capacity(n)),
            path: path.to_owned(),
            busy_timeout,
        };
        let mut idle = Vec::with_capacity(n);
        for _ in 0..n {
            idle.push(readers.connect()?);
        }
        *crate::sync::lock(&readers.idle) = idle;
        Ok(readers)
    }

    fn connect(&self) -> Result<Connection, StoreError> {
        let flags =
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&self.path, flags).map_err(sql)?;
        conn.busy_timeout(self.busy_timeout).map_err(sql)?;
        // A read connection never writes, whatever a bug might ask of it, nor checkpoints as it closes (see
        // `super::connect`).
        conn.pragma_update(None, "query_only", true).map_err(sql)?;
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(sql)?;
        // Reads are lookups and short pages; the operating system's page cache holds the file for all of them.
        // SQLite's default cache, 2 MB a connection, multiplied by the pool, was a large share of the server's
        // memory budget for nothing the page cache does not already hold.
        conn.pragma_update(None, "cache_size", READER_CACHE_KIB)
            .map_err(sql)?;
        Ok(conn)
    }

    /// Runs `f` on an idle connection (a new one if all are busy; at most the pool's size is kept).
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let taken = crate::sync::lock(&self.idle).pop();
        let conn = match taken {
            Some(c) => c,
            None => self.connect()?,
        };
        let result = f(&conn);
        let mut idle = crate::sync::lock(&self.idle);
        if idle.len() < READERS {
            idle.push(conn);
        }
        result
    }
}
