//! A file system for fault tests: FUSE (the `fuser` crate), held in memory, that keeps apart what a process has
//! written (the page cache: what reads see) from what is on the disk (what an `fsync` stored), so that a test can
//! lose power, fail a sync, or both, under a real `inbox serve`.
//!
//! What it models, as Linux does it:
//! - **Writes** land in the cache; an `fsync`/`fdatasync` of a file stores its dirty pages (and its length) on the
//!   disk. Names (create, unlink, rename, mkdir) are on the disk at once: a simplification no test here leans on.
//! - **A failed sync** ([`Disk::fail_fsync`]): the armed `fsync` answers `EIO` and its file's dirty pages are
//!   marked clean without being stored: the cache goes on showing them, a later sync of the file does not write
//!   them, and once the file grows past them the disk holds zeros there (a gap).
//! - **Errors reported once per descriptor** (Linux's `errseq_t`): a failed sync is also reported by the next
//!   sync through every descriptor of the file that was open when it failed, and to no descriptor opened after.
//! - **Power loss** ([`Disk::power_cut`]): every file's cache becomes what its disk holds.
//! - **A slow disk** ([`Disk::slow_fsync`]): every `fsync` takes that long before it stores anything. The file
//!   system answers one request at a time, so while a sync is under way the reads and writes behind it wait too,
//!   as on a disk saturated by its writeback.
//!
//! Mounting needs `/dev/fuse` and root (CI runs as root); [`Disk::mount`] says so when it cannot.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    AccessFlags, BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};

/// The unit of dirtiness: a page.
const PAGE: u64 = 4096;
/// Nothing is cached by the kernel beyond one call: after a power cut every read must come here again.
const TTL: Duration = Duration::ZERO;

/// A sync to fail: the next `fsync` of a file whose name ends with `file`, by a thread whose name starts with
/// `thread` (as `/proc/TID/comm` has it: 15 characters at most), if given, once the file has been written at least
/// `min_extent` bytes far since it was last written at its start (a WAL that SQLite starts over rewrites its
/// header at offset 0 and syncs it: `min_extent` tells that sync apart from one of a WAL grown long).
#[derive(Clone, Debug, Default)]
pub struct FsyncFault {
    pub file: String,
    pub thread: Option<String>,
    pub min_extent: u64,
}

/// A failed sync as it was met: the file, the calling thread's name, and when.
#[derive(Clone, Debug)]
pub struct Met {
    pub file: String,
    pub thread: String,
    pub at: Instant,
}

/// The test's handle on a mounted [`Disk`]: arm faults, cut the power, read what was met. Unmounts when dropped.
pub struct Disk {
    state: Arc<Mutex<State>>,
    session: Option<BackgroundSession>,
}

impl Disk {
    /// Mounts an empty file system at `at` (an existing, empty directory).
    pub fn mount(at: &Path) -> Result<Disk, String> {
        let state = Arc::new(Mutex::new(State::new()));
        let mut config = Config::default();
        config.mount_options = vec![MountOption::FSName("inbox-faultfs".into()), MountOption::NoAtime];
        let session = fuser::spawn_mount(FaultFs(state.clone()), at, &config).map_err(|e| {
            format!(
                "cannot mount the fault file system at {} (it needs /dev/fuse and root): {e}",
                at.display()
            )
        })?;
        Ok(Disk {
            state,
            session: Some(session),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Arms one failed sync (see [`FsyncFault`]); faults armed together fail one sync each.
    pub fn fail_fsync(&self, fault: FsyncFault) {
        self.state().armed.push(fault);
    }

    /// Whether an armed fault is still waiting for its sync.
    pub fn armed(&self) -> bool {
        !self.state().armed.is_empty()
    }

    /// The failed syncs met so far.
    pub fn met(&self) -> Vec<Met> {
        self.state().met.clone()
    }

    /// Power loss: every file holds what its last successful syncs stored, and nothing else. Answers how many pages
    /// written were never synced (and are gone).
    pub fn power_cut(&self) -> usize {
        let mut state = self.state();
        let mut gone = 0;
        for node in state.nodes.values_mut() {
            if let Kind::File(f) = &mut node.kind {
                gone += f.dirty.len();
                f.cache = f.disk.clone();
                f.dirty.clear();
            }
        }
        gone
    }

    /// From now on every `fsync` takes `delay` (zero: as fast as the memory) before it stores anything.
    pub fn slow_fsync(&self, delay: Duration) {
        self.state().slow = delay;
    }

    /// Syncs answered (successful or not), and bytes stored by them, so far.
    pub fn syncs(&self) -> (u64, u64) {
        let state = self.state();
        (state.syncs, state.stored)
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct State {
    nodes: HashMap<u64, Node>,
    next_ino: u64,
    /// Open descriptors: `fh -> (inode, the file's error sequence when it was opened or last reported)`.
    handles: HashMap<u64, (u64, u64)>,
    next_fh: u64,
    armed: Vec<FsyncFault>,
    met: Vec<Met>,
    syncs: u64,
    stored: u64,
    /// How long each `fsync` takes ([`Disk::slow_fsync`]).
    slow: Duration,
}

struct Node {
    name: OsString,
    kind: Kind,
    mode: u16,
    mtime: SystemTime,
}

enum Kind {
    Dir(BTreeMap<OsString, u64>),
    File(Data),
}

#[derive(Default)]
struct Data {
    /// What reads see.
    cache: Vec<u8>,
    /// What a power loss leaves.
    disk: Vec<u8>,
    /// Pages written since the last sync.
    dirty: BTreeSet<u64>,
    /// Failed syncs of this file so far (Linux's `errseq_t`).
    errors: u64,
    /// How far the file has been written since it was last written at offset 0.
    extent: u64,
}

impl Data {
    /// A successful sync: the dirty pages and the length, on the disk. Returns the bytes stored.
    fn store(&mut self) -> u64 {
        let len = self.cache.len();
        self.disk.resize(len, 0);
        let mut stored = 0;
        for page in std::mem::take(&mut self.dirty) {
            let from = usize::try_from(page * PAGE).unwrap_or(usize::MAX).min(len);
            let to = usize::try_from((page + 1) * PAGE).unwrap_or(usize::MAX).min(len);
            self.disk[from..to].copy_from_slice(&self.cache[from..to]);
            stored += (to - from) as u64;
        }
        stored
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        let Ok(start) = usize::try_from(offset) else {
            return;
        };
        let end = offset + data.len() as u64;
        self.extent = if offset == 0 { end } else { self.extent.max(end) };
        let end = start + data.len();
        if self.cache.len() < end {
            self.cache.resize(end, 0);
        }
        self.cache[start..end].copy_from_slice(data);
        if !data.is_empty() {
            self.dirty
                .extend(offset / PAGE..=(offset + data.len() as u64 - 1) / PAGE);
        }
    }

    fn truncate(&mut self, size: u64) {
        let old = self.cache.len() as u64;
        self.cache.resize(usize::try_from(size).unwrap_or(usize::MAX), 0);
        // The length is stored by the next sync; a grown tail is dirty, a cut one leaves nothing to store.
        if size > old {
            self.dirty.extend(old / PAGE..=size.saturating_sub(1) / PAGE);
        }
        self.dirty.retain(|page| page * PAGE < size);
    }
}

impl State {
    fn new() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            INodeNo::ROOT.0,
            Node {
                name: OsString::from("/"),
                kind: Kind::Dir(BTreeMap::new()),
                mode: 0o755,
                mtime: SystemTime::now(),
            },
        );
        State {
            nodes,
            next_ino: INodeNo::ROOT.0 + 1,
            handles: HashMap::new(),
            next_fh: 1,
            armed: Vec::new(),
            met: Vec::new(),
            syncs: 0,
            stored: 0,
            slow: Duration::ZERO,
        }
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let node = self.nodes.get(&ino)?;
        let (kind, size) = match &node.kind {
            Kind::Dir(_) => (FileType::Directory, 0),
            Kind::File(f) => (FileType::RegularFile, f.cache.len() as u64),
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: node.mtime,
            mtime: node.mtime,
            ctime: node.mtime,
            crtime: node.mtime,
            kind,
            perm: node.mode,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: PAGE as u32,
            flags: 0,
        })
    }

    fn entries(&mut self, dir: u64) -> Option<&mut BTreeMap<OsString, u64>> {
        match &mut self.nodes.get_mut(&dir)?.kind {
            Kind::Dir(entries) => Some(entries),
            Kind::File(_) => None,
        }
    }

    fn file(&mut self, ino: u64) -> Option<&mut Data> {
        match &mut self.nodes.get_mut(&ino)?.kind {
            Kind::File(f) => Some(f),
            Kind::Dir(_) => None,
        }
    }

    fn add(&mut self, parent: u64, name: &OsStr, kind: Kind, mode: u32) -> Result<u64, Errno> {
        let ino = self.next_ino;
        let entries = self.entries(parent).ok_or(Errno::ENOTDIR)?;
        if entries.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        entries.insert(name.to_owned(), ino);
        self.next_ino += 1;
        self.nodes.insert(
            ino,
            Node {
                name: name.to_owned(),
                kind,
                mode: (mode & 0o7777) as u16,
                mtime: SystemTime::now(),
            },
        );
        Ok(ino)
    }

    fn open(&mut self, ino: u64) -> u64 {
        let errors = self.file(ino).map_or(0, |f| f.errors);
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, (ino, errors));
        fh
    }
}

/// The name of the thread that made a request (`/proc/TID/comm`; FUSE passes the thread's id).
fn thread_name(tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{tid}/comm"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| format!("tid {tid}"))
}

struct FaultFs(Arc<Mutex<State>>);

impl FaultFs {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.0)
    }
}

impl Filesystem for FaultFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut state = self.state();
        let found = state.entries(parent.0).and_then(|e| e.get(name).copied());
        match found.and_then(|ino| state.attr(ino)) {
            Some(attr) => reply.entry(&TTL, &attr, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.state().attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut state = self.state();
        if let Some(size) = size {
            match state.file(ino.0) {
                Some(f) => f.truncate(size),
                None => return reply.error(Errno::EISDIR),
            }
        }
        if let Some(node) = state.nodes.get_mut(&ino.0) {
            if let Some(mode) = mode {
                node.mode = (mode & 0o7777) as u16;
            }
            node.mtime = SystemTime::now();
        }
        match state.attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.state();
        match state.add(parent.0, name, Kind::Dir(BTreeMap::new()), mode) {
            Ok(ino) => match state.attr(ino) {
                Some(attr) => reply.entry(&TTL, &attr, Generation(0)),
                None => reply.error(Errno::EIO),
            },
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.state().entries(parent.0).and_then(|e| e.remove(name)) {
            Some(_) => reply.ok(),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut state = self.state();
        let Some(ino) = state.entries(parent.0).and_then(|e| e.get(name).copied()) else {
            return reply.error(Errno::ENOENT);
        };
        if state.entries(ino).is_some_and(|e| !e.is_empty()) {
            return reply.error(Errno::ENOTEMPTY);
        }
        if let Some(e) = state.entries(parent.0) {
            e.remove(name);
        }
        reply.ok();
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut state = self.state();
        let Some(ino) = state.entries(parent.0).and_then(|e| e.remove(name)) else {
            return reply.error(Errno::ENOENT);
        };
        match state.entries(newparent.0) {
            Some(entries) => {
                entries.insert(newname.to_owned(), ino);
                if let Some(node) = state.nodes.get_mut(&ino) {
                    node.name = newname.to_owned();
                }
                reply.ok();
            }
            None => reply.error(Errno::ENOTDIR),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut state = self.state();
        if !state.nodes.contains_key(&ino.0) {
            return reply.error(Errno::ENOENT);
        }
        let fh = state.open(ino.0);
        // No FOPEN_KEEP_CACHE: the kernel drops what it cached of the file at each open, so a process started
        // after a power cut reads what the disk holds.
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut state = self.state();
        let Some(f) = state.file(ino.0) else {
            return reply.error(Errno::EISDIR);
        };
        let len = f.cache.len();
        let from = usize::try_from(offset).unwrap_or(len).min(len);
        let to = from.saturating_add(size as usize).min(len);
        reply.data(&f.cache[from..to]);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut state = self.state();
        match state.file(ino.0) {
            Some(f) => {
                f.write(offset, data);
                reply.written(data.len() as u32);
            }
            None => reply.error(Errno::EISDIR),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.state().handles.remove(&fh.0);
        reply.ok();
    }

    fn fsync(&self, req: &Request, ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let thread = thread_name(req.pid());
        // A slow disk: the sync takes this long (the lock is not held meanwhile; the session serves one request
        // at a time, so what comes behind it waits).
        let slow = self.state().slow;
        if !slow.is_zero() {
            std::thread::sleep(slow);
        }
        let mut state = self.state();
        state.syncs += 1;
        let name = match state.nodes.get(&ino.0) {
            Some(node) => node.name.to_string_lossy().into_owned(),
            None => return reply.error(Errno::ENOENT),
        };
        let extent = state.file(ino.0).map_or(0, |f| f.extent);
        let armed = state.armed.iter().position(|fault| {
            name.ends_with(&fault.file)
                && fault.thread.as_ref().is_none_or(|t| thread.starts_with(t))
                && extent >= fault.min_extent
        });
        if let Some(i) = armed {
            state.armed.remove(i);
            state.met.push(Met {
                file: name,
                thread,
                at: Instant::now(),
            });
            let Some(f) = state.file(ino.0) else {
                return reply.error(Errno::EIO);
            };
            // The pages this sync was to store are marked clean, not stored; the error is this caller's.
            f.dirty.clear();
            f.errors += 1;
            let errors = f.errors;
            if let Some(handle) = state.handles.get_mut(&fh.0) {
                handle.1 = errors;
            }
            return reply.error(Errno::EIO);
        }
        let Some(f) = state.file(ino.0) else {
            return reply.ok();
        };
        let stored = f.store();
        let errors = f.errors;
        state.stored += stored;
        // A failure since this descriptor last looked is reported to it once (after storing what is dirty now).
        let seen = state
            .handles
            .get_mut(&fh.0)
            .map(|handle| std::mem::replace(&mut handle.1, errors));
        match seen {
            Some(seen) if seen < errors => reply.error(Errno::EIO),
            _ => reply.ok(),
        }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let mut state = self.state();
        let Some(entries) = state.entries(ino.0) else {
            return reply.error(Errno::ENOTDIR);
        };
        let entries: Vec<(OsString, u64)> = entries.iter().map(|(n, i)| (n.clone(), *i)).collect();
        let mut all = vec![(OsString::from("."), ino.0), (OsString::from(".."), ino.0)];
        all.extend(entries);
        for (i, (name, child)) in all
            .into_iter()
            .enumerate()
            .skip(usize::try_from(offset).unwrap_or(0))
        {
            let kind = match state.nodes.get(&child).map(|n| &n.kind) {
                Some(Kind::Dir(_)) => FileType::Directory,
                _ => FileType::RegularFile,
            };
            if reply.add(INodeNo(child), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // Names are on the disk at once.
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(
            1 << 20,
            1 << 19,
            1 << 19,
            1 << 20,
            1 << 19,
            PAGE as u32,
            255,
            PAGE as u32,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = self.state();
        match state.add(parent.0, name, Kind::File(Data::default()), mode) {
            Ok(ino) => {
                let fh = state.open(ino);
                match state.attr(ino) {
                    Some(attr) => {
                        reply.created(&TTL, &attr, Generation(0), FileHandle(fh), FopenFlags::empty())
                    }
                    None => reply.error(Errno::EIO),
                }
            }
            Err(e) => reply.error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_sync_leaves_a_gap_that_a_later_sync_does_not_fill() {
        let mut f = Data::default();
        f.write(0, &[1; 4096]);
        assert_eq!(f.store(), 4096);
        f.write(4096, &[2; 4096]);
        // The failed sync: marked clean, not stored.
        f.dirty.clear();
        f.write(8192, &[3; 4096]);
        f.store();
        assert_eq!(f.cache.len(), 3 * 4096);
        assert_eq!(
            &f.disk[4096..8192],
            &[0; 4096][..],
            "the lost page is a gap on the disk"
        );
        assert_eq!(&f.disk[8192..], &[3; 4096][..]);
        assert_eq!(&f.cache[4096..8192], &[2; 4096][..], "the cache still shows it");
    }

    #[test]
    fn a_truncated_file_is_stored_short() {
        let mut f = Data::default();
        f.write(0, &[1; 10_000]);
        f.store();
        f.truncate(100);
        f.store();
        assert_eq!(f.disk.len(), 100);
    }
}
