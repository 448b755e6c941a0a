//! A small pool of worker threads for splitting one call's outer range.
//!
//! A select call is short (microseconds to milliseconds), so what matters is the cost of handing
//! out the parts: the workers are started once, spin for a short while after each job (so that
//! back-to-back calls find them awake), and then park on a condition variable until the next
//! job's generation number is published. A call that finds the pool busy (another thread of the
//! program is using it) runs on its own thread instead of waiting.
//!
//! Public so that a benchmark can split a copy over the same kind of workers (the
//! multi-threaded copy yardstick of `selectjit bench`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// How long a worker spins for the next job before it parks, and the caller for the other
/// parts before it blocks.
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Spins until `done()` or until [`SPIN`] has passed; returns `done()`.
fn spin_until(done: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    loop {
        for _ in 0..64 {
            if done() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= SPIN {
            return done();
        }
    }
}

/// A job: part `i` of `parts` is `f(i)`. The reference's lifetime is erased; [`Pool::run`] waits
/// until every part has finished before it returns, so the closure outlives every use.
#[derive(Clone, Copy)]
struct Job {
    f: *const (dyn Fn(usize) + Sync),
    parts: usize,
}

// SAFETY: `f` points at a `Sync` closure, so calling it from other threads is allowed; the
// pointer is only dereferenced while `Pool::run`, which owns the borrow, waits.
unsafe impl Send for Job {}

struct Shared {
    /// The current job and its generation; workers wait on `wake` for the generation to change.
    job: Mutex<(u64, Option<Job>)>,
    wake: Condvar,
    /// Generation of the latest job, readable without the lock (for spinning workers).
    generation: AtomicU64,
    /// Parts of the current job not finished yet (the caller's own part excluded).
    pending: AtomicUsize,
    /// Set when a part panicked; the caller panics in turn once all parts are done.
    panicked: AtomicBool,
    done: Mutex<()>,
    done_cv: Condvar,
    shutdown: AtomicBool,
}

/// Worker threads that run the parts of one job at a time.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    /// Held by the caller whose job runs; other callers run on their own thread.
    busy: Mutex<()>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    /// A pool of `threads - 1` workers (the caller is the first thread); `None` when `threads`
    /// is below 2 or no thread could be started.
    pub(crate) fn new(threads: usize) -> Option<Pool> {
        if threads < 2 {
            return None;
        }
        let shared = Arc::new(Shared {
            job: Mutex::new((0, None)),
            wake: Condvar::new(),
            generation: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            done: Mutex::new(()),
            done_cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
        });
        let mut workers = Vec::new();
        for i in 1..threads {
            let s = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("selectjit-{i}"))
                .spawn(move || worker(&s, i));
            match h {
                Ok(h) => workers.push(h),
                Err(_) => break,
            }
        }
        (!workers.is_empty()).then(|| Pool {
            shared,
            busy: Mutex::new(()),
            workers,
        })
    }

    /// Threads a job can use: the workers and the caller.
    pub(crate) fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `f(0)`, …, `f(parts - 1)`, part 0 on the calling thread and the others on the
    /// workers (at most [`Pool::threads`] parts). Returns false, having run nothing, when the pool
    /// is busy with another caller's job.
    pub(crate) fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) -> bool {
        let _guard = match self.busy.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        let parts = parts.clamp(1, self.threads());
        let s = &*self.shared;
        s.pending.store(parts - 1, Ordering::Release);
        s.panicked.store(false, Ordering::Relaxed);
        // SAFETY: the lifetime of `f` is erased for the workers; this function does not return
        // before `pending` is 0, i.e. before every worker is done with this job (see below).
        let erased: *const (dyn Fn(usize) + Sync + 'static) =
            unsafe { std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), _>(f as *const _) };
        {
            let mut j = s.job.lock().unwrap_or_else(|p| p.into_inner());
            j.0 += 1;
            j.1 = Some(Job { f: erased, parts });
            s.generation.store(j.0, Ordering::Release);
        }
        s.wake.notify_all();
        let mine = catch_unwind(AssertUnwindSafe(|| f(0)));
        // Wait for the other parts: spin first (they are about as long as ours), then block.
        let finished = || s.pending.load(Ordering::Acquire) == 0;
        if !spin_until(finished) {
            let mut g = s.done.lock().unwrap_or_else(|p| p.into_inner());
            while !finished() {
                g = s.done_cv.wait(g).unwrap_or_else(|p| p.into_inner());
            }
        }
        if let Err(p) = mine {
            std::panic::resume_unwind(p);
        }
        if s.panicked.load(Ordering::Relaxed) {
            panic!("a part of a split select call panicked");
        }
        true
    }
}

fn worker(s: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        // Spin briefly for the next generation, then park.
        spin_until(|| {
            s.generation.load(Ordering::Acquire) != seen || s.shutdown.load(Ordering::Relaxed)
        });
        let job = {
            let mut j = s.job.lock().unwrap_or_else(|p| p.into_inner());
            while j.0 == seen && !s.shutdown.load(Ordering::Relaxed) {
                j = s.wake.wait(j).unwrap_or_else(|p| p.into_inner());
            }
            if s.shutdown.load(Ordering::Relaxed) {
                return;
            }
            seen = j.0;
            j.1
        };
        let Some(job) = job else { continue };
        if index >= job.parts {
            continue;
        }
        // SAFETY: `Pool::run` keeps the closure alive until `pending` reaches 0, which happens
        // only after this call returns (the decrement below).
        let r = catch_unwind(AssertUnwindSafe(|| unsafe { (*job.f)(index) }));
        if r.is_err() {
            s.panicked.store(true, Ordering::Relaxed);
        }
        if s.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _g = s.done.lock().unwrap_or_else(|p| p.into_inner());
            s.done_cv.notify_all();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Relaxed);
        {
            let _j = self.shared.job.lock().unwrap_or_else(|p| p.into_inner());
        }
        self.shared.wake.notify_all();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_runs_once_per_job() {
        let pool = Pool::new(3).unwrap();
        assert_eq!(pool.threads(), 3);
        for round in 0..2000usize {
            let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
            let parts = 1 + round % 3;
            assert!(pool.run(parts, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            }));
            for (i, h) in hits.iter().enumerate() {
                assert_eq!(h.load(Ordering::Relaxed), usize::from(i < parts), "{round}");
            }
            if round % 500 == 0 {
                // Let the workers park, so that waking them up is tested too.
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }

    #[test]
    fn a_busy_pool_refuses_and_a_small_one_is_none() {
        assert!(Pool::new(1).is_none());
        let pool = Pool::new(2).unwrap();
        let inner = std::sync::atomic::AtomicBool::new(true);
        assert!(pool.run(2, &|i| {
            if i == 0 {
                // A nested call from inside a job finds the pool busy.
                inner.store(pool.run(2, &|_| {}), Ordering::Relaxed);
            }
        }));
        assert!(!inner.load(Ordering::Relaxed));
    }

    #[test]
    fn a_panicking_part_reaches_the_caller() {
        let pool = Pool::new(2).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(2, &|i| {
                if i == 1 {
                    panic!("part 1");
                }
            })
        }));
        assert!(r.is_err());
        // The pool still works afterwards.
        let n = AtomicUsize::new(0);
        assert!(pool.run(2, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        }));
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }
}
