//! The plan of this thread's last strided call, so that a runtime calling the same strided,
//! broadcast or reversed layout again skips validation, broadcast inference and planning.
//!
//! [`check`](super::validate::check) and [`plan_layout`](crate::plan::plan_layout) are pure
//! functions of the element width, the mode, whether then and else trade places (a negated
//! mask) and the four operands' descriptions (buffer length, shape, strides and offset, all in
//! elements): nothing else they read, no pointer. A call whose
//! description equals the last successful one's therefore has the same outcome — valid, with
//! the same signature and kernel base elements — and the memo returns it. Failed calls are not
//! remembered, so an error is always reported by the checks themselves.

use std::cell::RefCell;

use smallvec::SmallVec;

use super::validate::Desc;
use crate::plan::Signature;
use crate::shape::Broadcast;

/// A call's description: per operand its length, offset, rank, stride marker (`usize::MAX`
/// without explicit strides, else the rank again), shape and strides.
pub(super) type Key = SmallVec<[usize; 48]>;

/// The outcome of a checked and planned call: its signature (`None`: an empty output) and
/// each operand's kernel base element.
pub(super) type Planned = (Option<Signature>, [usize; 4]);

struct Last {
    width: usize,
    mode: Broadcast,
    swap: bool,
    key: Key,
    planned: Planned,
}

thread_local! {
    static LAST: RefCell<Option<Last>> = const { RefCell::new(None) };
}

/// One operand's first words of a [`Key`]; its shape and strides (as `usize`) follow.
fn head(d: &Desc<'_>) -> [usize; 4] {
    let marker = d.strides.map_or(usize::MAX, <[isize]>::len);
    [d.len, d.offset, d.shape.len(), marker]
}

/// The description of a call's four operands.
fn key(ops: &[Desc<'_>; 4]) -> Key {
    let mut k = Key::new();
    for d in ops {
        k.extend_from_slice(&head(d));
        k.extend_from_slice(d.shape);
        k.extend(d.strides.unwrap_or(&[]).iter().map(|&x| x as usize));
    }
    k
}

/// Whether `key` describes `ops` (what [`key`] would build, compared in place: this runs on
/// every strided call, building the key would double its cost).
fn describes(key: &[usize], ops: &[Desc<'_>; 4]) -> bool {
    let mut rest = key;
    for d in ops {
        let (r, s) = (d.shape.len(), d.strides.unwrap_or(&[]));
        let n = 4 + r + s.len();
        if rest.len() < n
            || rest[..4] != head(d)
            || rest[4..4 + r] != *d.shape
            || !rest[4 + r..n].iter().zip(s).all(|(&a, &b)| a == b as usize)
        {
            return false;
        }
        rest = &rest[n..];
    }
    rest.is_empty()
}

/// Runs `f` on the remembered outcome of a call described by `width`, `mode`, `swap` and `ops`
/// if it was this thread's last planned call, and says whether it did.
pub(super) fn with_last(
    width: usize,
    mode: Broadcast,
    swap: bool,
    ops: &[Desc<'_>; 4],
    f: impl FnOnce(&Planned),
) -> bool {
    LAST.with(|l| {
        // A call made from inside `f` on this thread (none is known) finds the memo busy and
        // plans for itself.
        let Ok(l) = l.try_borrow() else {
            return false;
        };
        match l.as_ref() {
            Some(last)
                if last.width == width
                    && last.mode == mode
                    && last.swap == swap
                    && describes(&last.key, ops) =>
            {
                f(&last.planned);
                true
            }
            _ => false,
        }
    })
}

/// Remembers the outcome of a call that passed its checks.
pub(super) fn remember(
    width: usize,
    mode: Broadcast,
    swap: bool,
    ops: &[Desc<'_>; 4],
    planned: Planned,
) {
    LAST.with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            *l = Some(Last {
                width,
                mode,
                swap,
                key: key(ops),
                planned,
            });
        }
    });
}
