//! Executable memory for machine code emitted directly (the x86-64 tier).
//!
//! System calls dominate the cost of making a small kernel executable (on a virtual machine a
//! fresh `mmap` with its page fault takes several microseconds, `munmap` more), so kernels that
//! fit in one page take one from a pool: pages are mapped sixteen at a time, each is made
//! executable with one `mprotect` when it receives a kernel, and made writable again and
//! returned to the pool when the kernel is dropped. A page is never writable and executable at
//! once. Larger kernels get a mapping of their own.

use std::sync::Mutex;

use crate::error::{Error, Result};

/// Pages mapped per batch of the pool.
const BATCH: usize = 16;
/// Free pages kept at most; further freed pages are unmapped.
const MAX_FREE: usize = 256;

/// Free pages of the pool (addresses of writable, non-executable pages), shared by all engines.
static FREE: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn page_size() -> usize {
    static P: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *P.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    })
}

fn os_err(what: &str) -> Error {
    Error::codegen_from(
        format!("executable memory: {what}"),
        std::io::Error::last_os_error(),
    )
}

/// A page of the pool, writable, or the pool's error.
fn take_page() -> Result<usize> {
    let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = free.pop() {
        return Ok(p);
    }
    let ps = page_size();
    // SAFETY: a fresh anonymous private mapping; no existing memory is affected.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            BATCH * ps,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(os_err("mmap"));
    }
    let base = base as usize;
    free.extend((1..BATCH).map(|k| base + k * ps));
    Ok(base)
}

/// Where a kernel's code lives.
enum Store {
    /// One page of the pool, readable and executable.
    Page(usize),
    /// A mapping of its own (code larger than a page).
    Map(memmap2::Mmap),
}

/// One kernel's machine code, readable and executable (never writable and executable at once).
/// Its page returns to the pool (or its mapping is unmapped) on drop.
pub(crate) struct ExecMem {
    store: Store,
    len: usize,
}

// SAFETY: the memory is owned by this value alone and never written while it exists (it is
// read-only and executable from `new` to `drop`), so sharing and sending it is sound.
unsafe impl Send for ExecMem {}
// SAFETY: as above; `&ExecMem` gives only reads.
unsafe impl Sync for ExecMem {}

impl ExecMem {
    /// Copies `code` into fresh memory and makes it executable.
    pub(crate) fn new(code: &[u8]) -> Result<ExecMem> {
        let ps = page_size();
        if code.len() > ps {
            let err = |e: std::io::Error| Error::codegen_from("executable memory", e);
            let mut m = memmap2::MmapOptions::new()
                .len(code.len())
                .populate()
                .map_anon()
                .map_err(err)?;
            m.copy_from_slice(code);
            return Ok(ExecMem {
                store: Store::Map(m.make_exec().map_err(err)?),
                len: code.len(),
            });
        }
        let page = take_page()?;
        // SAFETY: `page` is a writable page of the pool that nothing else uses (taken from the
        // free list under its lock), `ps` bytes long; `code` fits in it. The rest is filled
        // with `int3`.
        unsafe {
            let p = page as *mut u8;
            std::ptr::copy_nonoverlapping(code.as_ptr(), p, code.len());
            std::ptr::write_bytes(p.add(code.len()), 0xcc, ps - code.len());
        }
        // SAFETY: the page is ours (see above); it becomes read-only and executable.
        if unsafe { libc::mprotect(page as *mut _, ps, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
            let e = os_err("mprotect");
            release(page);
            return Err(e);
        }
        Ok(ExecMem {
            store: Store::Page(page),
            len: code.len(),
        })
    }

    /// The first byte of the code.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        match &self.store {
            Store::Page(p) => *p as *const u8,
            Store::Map(m) => m.as_ptr(),
        }
    }

    /// The code bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of the page or mapping hold the code, readable while
        // `self` lives.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }
}

/// Makes `page` writable again and returns it to the pool (or unmaps it when the pool is full).
/// A page that cannot be made writable is left mapped and never reused.
fn release(page: usize) {
    let ps = page_size();
    let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
    if free.len() >= MAX_FREE {
        // SAFETY: the page belongs to the pool's mappings and no kernel uses it any more.
        unsafe { libc::munmap(page as *mut _, ps) };
        return;
    }
    // SAFETY: as above; it becomes writable and not executable.
    if unsafe { libc::mprotect(page as *mut _, ps, libc::PROT_READ | libc::PROT_WRITE) } == 0 {
        free.push(page);
    }
}

impl Drop for ExecMem {
    fn drop(&mut self) {
        if let Store::Page(p) = self.store {
            release(p);
        }
    }
}
