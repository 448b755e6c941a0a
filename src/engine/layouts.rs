//! The plans of this thread's last [`KEEP`] planned calls, so that a runtime calling the same
//! strided, broadcast or reversed layouts again (a model's few select nodes taking turns, the
//! branches of an n-way select), or the same predicates on the same shapes, skips validation,
//! broadcast inference and planning.
//!
//! [`check`](super::validate::check) and [`plan_layout`](crate::plan::plan_layout) (for a
//! predicate [`check_pred`](super::validate::check_pred) and
//! [`plan_cond`](crate::plan::plan_cond)) are pure functions of the element width, the mode,
//! the condition's form (a mask, or a predicate's kind and whether the call is in place, and
//! whether then and else trade places: a negation or a canonical form's) and
//! the operands' descriptions (buffer length, shape, strides and offset, all in elements):
//! nothing else they read, no pointer. A call whose description equals the last successful
//! one's therefore has the same outcome — valid, with the same signature and kernel base
//! elements — and the memo returns it. Failed calls are not remembered, so an error is always
//! reported by the checks themselves.

use std::cell::RefCell;

use smallvec::SmallVec;

use super::validate::Desc;
use crate::plan::{OPS, Signature};
use crate::pred::Kind;
use crate::shape::Broadcast;

/// A call's description: per operand its length, offset, rank, stride marker (`usize::MAX`
/// without explicit strides, else the rank again), shape and strides.
pub(super) type Key = SmallVec<[usize; 48]>;

/// The outcome of a checked and planned call: its signature (`None`: an empty output) and
/// each operand's kernel base element (a mask call's rhs: 0).
pub(super) type Planned = (Option<Signature>, [usize; OPS]);

/// The form of a call's condition, which the checks and the plan depend on besides the
/// operands' descriptions; each with whether then and else trade places after the checks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    Mask {
        swap: bool,
    },
    /// A predicate of this canonical kind.
    Pred {
        kind: Kind,
        in_place: bool,
        swap: bool,
    },
}

/// The description of a predicate operand that is the in-place output: no buffer has
/// `usize::MAX` elements, so it equals no real operand's.
pub(super) const IN_PLACE: Desc<'static> = Desc {
    len: usize::MAX,
    shape: &[],
    strides: None,
    offset: 0,
};

struct Last {
    width: usize,
    mode: Broadcast,
    form: Form,
    key: Key,
    planned: Planned,
}

/// Plans remembered per thread, most recent first.
const KEEP: usize = 4;

thread_local! {
    static LAST: RefCell<Vec<Last>> = const { RefCell::new(Vec::new()) };
}

/// One operand's first words of a [`Key`]; its shape and strides (as `usize`) follow.
fn head(d: &Desc<'_>) -> [usize; 4] {
    let marker = d.strides.map_or(usize::MAX, <[isize]>::len);
    [d.len, d.offset, d.shape.len(), marker]
}

/// The description of a call's operands.
fn key(ops: &[Desc<'_>]) -> Key {
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
fn describes(key: &[usize], ops: &[Desc<'_>]) -> bool {
    let mut rest = key;
    for d in ops {
        let (r, s) = (d.shape.len(), d.strides.unwrap_or(&[]));
        let n = 4 + r + s.len();
        // Word by word: these are a few words each, where a call to `memcmp` costs more than
        // the comparison.
        if rest.len() < n
            || !rest[..4].iter().zip(head(d)).all(|(&a, b)| a == b)
            || !rest[4..4 + r].iter().zip(d.shape).all(|(a, b)| a == b)
            || !rest[4 + r..n].iter().zip(s).all(|(&a, &b)| a == b as usize)
        {
            return false;
        }
        rest = &rest[n..];
    }
    rest.is_empty()
}

/// Runs `f` on the remembered outcome of a call described by `width`, `mode`, `form` and `ops`
/// if it is one of this thread's last planned calls, and says whether it did.
pub(super) fn with_last(
    width: usize,
    mode: Broadcast,
    form: Form,
    ops: &[Desc<'_>],
    f: impl FnOnce(&Planned),
) -> bool {
    LAST.with(|l| {
        // A call made from inside `f` on this thread (none is known) finds the memo busy and
        // plans for itself.
        let Ok(l) = l.try_borrow() else {
            return false;
        };
        let hit = l.iter().find(|last| {
            last.width == width
                && last.mode == mode
                && last.form == form
                && describes(&last.key, ops)
        });
        match hit {
            Some(last) => {
                f(&last.planned);
                true
            }
            None => false,
        }
    })
}

/// Remembers the outcome of a call that passed its checks.
pub(super) fn remember(
    width: usize,
    mode: Broadcast,
    form: Form,
    ops: &[Desc<'_>],
    planned: Planned,
) {
    LAST.with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            l.truncate(KEEP - 1);
            l.insert(
                0,
                Last {
                    width,
                    mode,
                    form,
                    key: key(ops),
                    planned,
                },
            );
        }
    });
}
