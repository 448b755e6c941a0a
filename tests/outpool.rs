//! The engine's pool of output buffers: recycled memory within the cap, aged out and trimmed,
//! buffers that outlive the engine, and the engine without a pool.

use std::time::Duration;

use selectjit::{Broadcast, Cond, Engine, EngineConfig, OutputPool, TensorMut, TensorRef};

const MIB: usize = 1 << 20;

fn engine(config: EngineConfig) -> Engine {
    Engine::with_config(config.threads(1)).unwrap()
}

#[test]
fn many_sizes_never_hold_more_than_the_cap() {
    let cap = 24 * MIB;
    let e = engine(
        EngineConfig::new()
            .output_pool_cap(cap)
            .output_pool_max_age(Duration::from_secs(3600)),
    );
    let sizes = [1, 2, 3, 5, 8, 13, 7, 4, 1, 2, 20, 30, 3];
    let mut live = Vec::new();
    for (i, &mib) in sizes.iter().cycle().take(80).enumerate() {
        // Sizes of several classes, with odd tails.
        let n = mib * MIB / 4 + i * 17;
        let mut b = e.output_buffer::<u32>(n).unwrap();
        assert!(b.iter().step_by(4099).all(|&v| v == 0), "a zeroed buffer");
        assert_eq!(b.as_ptr() as usize % OutputPool::ALIGN, 0);
        b[0] = i as u32;
        b[n - 1] = !(i as u32);
        live.push(b);
        if i % 4 != 1 {
            let b = live.remove((i * 7) % live.len());
            assert_eq!((b[0] as usize ^ !b[b.len() - 1] as usize) & 0xffff_ffff, 0);
        }
        let s = e.output_pool_stats();
        assert!(
            s.held_bytes <= cap,
            "held {} > cap {cap}: {s:?}",
            s.held_bytes
        );
        assert_eq!(s.live_buffers, live.len(), "{s:?}");
    }
    drop(live);
    let s = e.output_pool_stats();
    assert!(s.held_bytes <= cap && s.held_buffers > 0, "{s:?}");
    assert!(s.hits > 0 && s.misses > 0 && s.released > 0, "{s:?}");
    assert_eq!((s.live_buffers, s.live_bytes), (0, 0));
}

#[test]
fn a_rebinding_loop_reuses_one_buffer() {
    let e = engine(EngineConfig::new());
    let n = 4 * MIB;
    let x: Vec<f32> = (0..n).map(|i| i as f32 - (n / 2) as f32).collect();
    let shape = [n];
    let xv = TensorRef::new(&x, &shape);
    let mut first = None;
    for _ in 0..5 {
        let mut out = e.output_buffer::<f32>(n).unwrap();
        e.select(
            Cond::gt(xv, 0.0f32),
            xv,
            TensorRef::scalar(&[0.0f32]),
            TensorMut::new(&mut out, &[n]),
            Broadcast::Numpy,
        )
        .unwrap();
        assert!(out.iter().zip(&x).all(|(&o, &v)| o == v.max(0.0)));
        assert_eq!(*first.get_or_insert(out.as_ptr()), out.as_ptr());
    }
    let s = e.output_pool_stats();
    assert_eq!((s.misses, s.hits, s.held_buffers), (1, 4, 1), "{s:?}");
    assert_eq!(s.held_bytes, 16 * MIB);
}

#[test]
fn trim_releases_everything_held() {
    let e = engine(EngineConfig::new());
    let bufs: Vec<_> = (1..6)
        .map(|m| e.output_buffer::<u8>(m * MIB).unwrap())
        .collect();
    drop(bufs);
    assert!(e.output_pool_stats().held_bytes >= 15 * MIB);
    e.trim_output_pool();
    let s = e.output_pool_stats();
    assert_eq!(
        (s.held_bytes, s.held_buffers, s.released),
        (0, 0, 5),
        "{s:?}"
    );
    // The pool still works after a trim.
    drop(e.output_buffer::<u8>(MIB).unwrap());
    assert_eq!(e.output_pool_stats().held_buffers, 1);
}

#[test]
fn unused_buffers_age_out() {
    let e = engine(EngineConfig::new().output_pool_max_age(Duration::from_millis(5)));
    drop(e.output_buffer::<u8>(2 * MIB).unwrap());
    drop(e.output_buffer::<u8>(3 * MIB).unwrap());
    assert_eq!(e.output_pool_stats().held_buffers, 2);
    std::thread::sleep(Duration::from_millis(50));
    let s = e.output_pool_stats();
    assert_eq!(
        (s.held_bytes, s.held_buffers, s.released),
        (0, 0, 2),
        "{s:?}"
    );
}

#[test]
fn buffers_outlive_the_engine_and_are_freed_on_other_threads() {
    let e = engine(EngineConfig::new());
    let pool = e.output_pool().unwrap().clone();
    let mut bufs: Vec<_> = (0..4)
        .map(|i| e.output_buffer::<u64>((i + 1) * MIB / 8 + 3).unwrap())
        .collect();
    drop(e.output_buffer::<u8>(MIB).unwrap()); // one held
    assert_eq!(pool.stats().held_buffers, 1);
    for (i, b) in bufs.iter_mut().enumerate() {
        b.iter_mut()
            .enumerate()
            .for_each(|(j, v)| *v = (i * 1000 + j) as u64);
    }
    drop(e); // the pool is closed: nothing held, later frees go to the allocator
    let s = pool.stats();
    assert_eq!(
        (s.held_buffers, s.live_buffers, s.cap_bytes),
        (0, 4, 0),
        "{s:?}"
    );
    let threads: Vec<_> = bufs
        .into_iter()
        .enumerate()
        .map(|(i, mut b)| {
            std::thread::spawn(move || {
                assert!(
                    b.iter()
                        .enumerate()
                        .all(|(j, &v)| v == (i * 1000 + j) as u64)
                );
                b.iter_mut().for_each(|v| *v = !*v); // still writable
                assert!(
                    b.iter()
                        .enumerate()
                        .all(|(j, &v)| v == !((i * 1000 + j) as u64))
                );
                drop(b);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = pool.stats();
    assert_eq!(
        (s.held_buffers, s.live_buffers, s.live_bytes),
        (0, 0, 0),
        "{s:?}"
    );
}

#[test]
fn without_a_pool_buffers_are_plain_allocations() {
    let e = engine(EngineConfig::new().output_pool(false));
    assert!(e.output_pool().is_none());
    for _ in 0..3 {
        let mut b = e.output_buffer::<f64>(MIB).unwrap();
        assert!(b.iter().all(|&v| v == 0.0));
        b[7] = 1.5;
        assert_eq!(b[7], 1.5);
    }
    assert_eq!(e.output_pool_stats(), selectjit::OutputPoolStats::default());
    e.trim_output_pool(); // nothing to do
}

/// Large pooled buffers ask for transparent huge pages, as numpy's own large arrays do (a
/// buffer on 4 KiB pages writes measurably slower than a preallocated numpy output).
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[test]
fn large_buffers_ask_for_huge_pages() {
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
        return; // a kernel without transparent huge pages: nothing to ask for
    }
    let e = engine(EngineConfig::new());
    let b = e.output_buffer::<u8>(16 * MIB).unwrap();
    // The middle of the buffer: the advice covers the whole pages of the block.
    let addr = b.as_ptr() as usize + 8 * MIB;
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut in_vma = false;
    let mut flags = None;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ')
            && let Some((lo, hi)) = range.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            in_vma = (lo..hi).contains(&addr);
        } else if in_vma && let Some(f) = line.strip_prefix("VmFlags:") {
            flags = Some(f.split_whitespace().map(str::to_owned).collect::<Vec<_>>());
        }
    }
    let flags = flags.expect("the buffer's mapping in /proc/self/smaps");
    assert!(flags.iter().any(|f| f == "hg"), "{flags:?}");
}
