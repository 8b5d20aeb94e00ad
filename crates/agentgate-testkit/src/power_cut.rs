//! A simulated power cut for SQLite: a VFS that keeps, for every file it
//! opens, what the file held at its last `xSync`, so a test can take "the
//! disk after a power cut" at any moment and reopen the database from it.
//!
//! SQLite's own crash tests work this way (`test6.c`): writes reach the
//! operating system at once, but only what a file was told to sync is
//! assumed to survive the cut. This VFS wraps the default one (`unix`),
//! passes every call through, and on each successful `xSync` of a file
//! records the file's whole contents, read through the same open file (a
//! second descriptor would drop SQLite's POSIX locks when closed). `xDelete`
//! forgets the file (a deleted rollback journal must not come back). The
//! `-shm` file is never synced, so it is never part of a cut, as after a
//! real reboot, and SQLite rebuilds it from the WAL.
//!
//! It is stricter than a real disk, which may keep some unsynced writes,
//! never looser: whatever a cut keeps was synced. Use it with
//! [`register`], then open `sqlite://PATH?vfs=agentgate_power_cut`
//! ([`url()`]); [`cut`] takes the synced files of a directory and
//! [`Cut::restore`] writes them into another, to reopen.
//!
//! This is the one module of the workspace with `unsafe` code: registering
//! a VFS is FFI (`libsqlite3-sys`, the SQLite sqlx links). It is a test
//! tool, never linked into the gateway.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::{CStr, OsStr, c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use libsqlite3_sys as ffi;

/// The VFS's name, for `?vfs=` in a SQLite URL.
pub const VFS: &str = "agentgate_power_cut";
const VFS_C: &CStr = c"agentgate_power_cut";

/// Every file's contents at its last sync, by path.
static SYNCED: Mutex<BTreeMap<PathBuf, Vec<u8>>> = Mutex::new(BTreeMap::new());
/// Our copy of each of the default VFS's method tables (by address), with
/// `xSync` and `xClose` replaced; leaked, as SQLite keeps pointers to them.
static METHODS: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());
/// The default VFS, wrapped (its address).
static REAL: OnceLock<usize> = OnceLock::new();

/// What this VFS keeps beside the default VFS's file object, in the same
/// allocation (SQLite allocates `szOsFile` bytes per open file).
struct Extra {
    real: *const ffi::sqlite3_io_methods,
    path: Option<PathBuf>,
}

/// Registers the VFS (once per process; later calls do nothing). It is not
/// made the default: only URLs that name it use it.
pub fn register() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, which
        // lives for the whole process; the copy is leaked for the same
        // reason, as SQLite keeps the pointer registered.
        unsafe {
            let real = ffi::sqlite3_vfs_find(std::ptr::null());
            assert!(!real.is_null(), "SQLite has no default VFS");
            let _ = REAL.set(real as usize);
            let mut vfs = *real;
            vfs.szOsFile = c_int::try_from(extra_offset(real) + size_of::<Extra>())
                .expect("a file object of a sane size");
            vfs.zName = VFS_C.as_ptr();
            vfs.pNext = std::ptr::null_mut();
            vfs.xOpen = Some(x_open);
            vfs.xDelete = Some(x_delete);
            let vfs = Box::leak(Box::new(vfs));
            let rc = ffi::sqlite3_vfs_register(vfs, 0);
            assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_vfs_register");
        }
    });
}

/// A SQLite URL for `path` on this VFS.
pub fn url(path: &Path) -> String {
    format!("sqlite://{}?vfs={VFS}", path.display())
}

/// The files of one directory as a power cut leaves them: each with what it
/// held at its last sync; files never synced are absent.
#[derive(Debug, Clone)]
pub struct Cut {
    files: BTreeMap<PathBuf, Vec<u8>>,
}

/// Cuts the power of directory `dir` now (other directories are unaffected).
pub fn cut(dir: &Path) -> Cut {
    let synced = SYNCED.lock().unwrap_or_else(PoisonError::into_inner);
    let files = synced
        .iter()
        .filter(|(path, _)| path.parent() == Some(dir))
        .filter_map(|(path, bytes)| Some((PathBuf::from(path.file_name()?), bytes.clone())))
        .collect();
    Cut { files }
}

/// Forgets what `dir`'s files synced (a test done with it frees the memory).
pub fn forget(dir: &Path) {
    SYNCED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|path, _| path.parent() != Some(dir));
}

impl Cut {
    /// Writes the surviving files into `dir`, under their own names.
    pub fn restore(&self, dir: &Path) -> std::io::Result<()> {
        for (name, bytes) in &self.files {
            std::fs::write(dir.join(name), bytes)?;
        }
        Ok(())
    }

    /// The names of the surviving files.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.keys().map(PathBuf::as_path)
    }
}

fn real_vfs() -> *mut ffi::sqlite3_vfs {
    REAL.get().map_or(std::ptr::null_mut(), |&p| p as *mut _)
}

/// Where [`Extra`] starts in a file object: after the default VFS's part,
/// aligned.
unsafe fn extra_offset(real: *const ffi::sqlite3_vfs) -> usize {
    // SAFETY: `real` is the default VFS (see `register`).
    let size = usize::try_from(unsafe { (*real).szOsFile }).unwrap_or(0);
    size.next_multiple_of(align_of::<Extra>())
}

unsafe fn extra(file: *mut ffi::sqlite3_file) -> *mut Extra {
    // SAFETY: SQLite allocated `szOsFile` bytes (see `register`) for `file`.
    unsafe { file.cast::<u8>().add(extra_offset(real_vfs())).cast() }
}

/// Our method table for files of the default VFS's table `real`.
fn wrapped(real: *const ffi::sqlite3_io_methods) -> *const ffi::sqlite3_io_methods {
    let mut tables = METHODS.lock().unwrap_or_else(PoisonError::into_inner);
    let ours = tables.entry(real as usize).or_insert_with(|| {
        // SAFETY: `real` is a method table of the default VFS, static in
        // SQLite.
        let mut methods = unsafe { *real };
        methods.xSync = Some(x_sync);
        methods.xClose = Some(x_close);
        Box::leak(Box::new(methods)) as *const ffi::sqlite3_io_methods as usize
    });
    *ours as *const _
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let real = real_vfs();
    // SAFETY: the default VFS opens into the first `szOsFile` bytes of our
    // larger file object; its methods never look past them.
    unsafe {
        let Some(open) = (*real).xOpen else {
            return ffi::SQLITE_ERROR;
        };
        let rc = open(real, name, file, flags, out_flags);
        if rc != ffi::SQLITE_OK || (*file).pMethods.is_null() {
            return rc;
        }
        let path = (!name.is_null())
            .then(|| PathBuf::from(OsStr::from_bytes(CStr::from_ptr(name).to_bytes())));
        let methods = (*file).pMethods;
        extra(file).write(Extra {
            real: methods,
            path,
        });
        (*file).pMethods = wrapped(methods);
        rc
    }
}

unsafe extern "C" fn x_delete(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    let real = real_vfs();
    // SAFETY: `name` is a NUL-terminated path from SQLite.
    unsafe {
        if !name.is_null() {
            let path = PathBuf::from(OsStr::from_bytes(CStr::from_ptr(name).to_bytes()));
            SYNCED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&path);
        }
        match (*real).xDelete {
            Some(delete) => delete(real, name, sync_dir),
            None => ffi::SQLITE_ERROR,
        }
    }
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: `file` was opened by `x_open`, which wrote its `Extra`.
    unsafe {
        let extra = &*extra(file);
        let real = &*extra.real;
        let Some(sync) = real.xSync else {
            return ffi::SQLITE_ERROR;
        };
        let rc = sync(file, flags);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let (Some(path), Some(file_size), Some(read)) = (&extra.path, real.xFileSize, real.xRead)
        else {
            return rc;
        };
        // The whole file, through SQLite's own descriptor.
        let mut size: ffi::sqlite3_int64 = 0;
        if file_size(file, &mut size) != ffi::SQLITE_OK {
            return ffi::SQLITE_IOERR_FSYNC;
        }
        let (Ok(len), Ok(amount)) = (usize::try_from(size), c_int::try_from(size)) else {
            return ffi::SQLITE_IOERR_FSYNC;
        };
        let mut bytes = vec![0u8; len];
        if len > 0 && read(file, bytes.as_mut_ptr().cast::<c_void>(), amount, 0) != ffi::SQLITE_OK {
            return ffi::SQLITE_IOERR_FSYNC;
        }
        SYNCED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.clone(), bytes);
        rc
    }
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: `file` was opened by `x_open`; its `Extra` is read out once,
    // here, and SQLite frees the memory after this call.
    unsafe {
        let extra = extra(file).read();
        match (*extra.real).xClose {
            Some(close) => close(file),
            None => ffi::SQLITE_ERROR,
        }
    }
}
