//! Growable structs (`SelectjitOptions`, `SelectjitCond`, `SelectjitStats`): the caller's
//! `uint32_t struct_size` checked against the first version and this library's struct, and the
//! fields that fit in it read one by one.

use crate::error::{Fail, SELECTJIT_ERR_NULL_POINTER, SELECTJIT_ERR_STRUCT_SIZE, fail};

/// The largest `struct_size` accepted (any struct of the API is far smaller).
pub const SELECTJIT_STRUCT_SIZE_MAX: u32 = 4096;

/// The size of a growable struct the caller hands over, checked: at least `min` (the first
/// version's size), at most `SELECTJIT_STRUCT_SIZE_MAX`, and when larger than this library's
/// struct, zero in every byte past it (fields of a newer header left at their defaults).
///
/// # Safety
/// `p` is NULL or points at a struct of the API whose `struct_size` readable bytes the caller
/// vouches for.
pub(crate) unsafe fn input_size<T>(what: &str, p: *const T, min: u32) -> Result<usize, Fail> {
    if p.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL; every struct of the API starts with its `uint32_t struct_size`.
    let size = unsafe { p.cast::<u32>().read_unaligned() };
    let ours = std::mem::size_of::<T>();
    check_size(what, size, min)?;
    let size = size as usize;
    if size > ours {
        // SAFETY: the caller vouches for `struct_size` (checked <= SELECTJIT_STRUCT_SIZE_MAX)
        // readable bytes.
        let all = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size) };
        if let Some(i) = all[ours..].iter().position(|&b| b != 0) {
            return Err(fail(
                SELECTJIT_ERR_STRUCT_SIZE,
                format!(
                    "{what}: struct_size {size} is larger than this library's {ours} and byte \
                     {} past it is set: a field of a newer header this library does not know",
                    ours + i
                ),
            ));
        }
    }
    Ok(size)
}

/// `struct_size` against the first version's size and the bound.
pub(crate) fn check_size(what: &str, size: u32, min: u32) -> Result<(), Fail> {
    if size < min {
        return Err(fail(
            SELECTJIT_ERR_STRUCT_SIZE,
            format!(
                "{what}: struct_size {size} is smaller than the first version's {min} \
                 (set it to sizeof the struct)"
            ),
        ));
    }
    if size > SELECTJIT_STRUCT_SIZE_MAX {
        return Err(fail(
            SELECTJIT_ERR_STRUCT_SIZE,
            format!(
                "{what}: struct_size {size} is absurdly large (at most \
                 {SELECTJIT_STRUCT_SIZE_MAX}; set it to sizeof the struct)"
            ),
        ));
    }
    Ok(())
}

/// The size of `*p` without reading it.
pub(crate) fn size_of_pointee<T>(_: *const T) -> usize {
    std::mem::size_of::<T>()
}

/// Copies from `$src` (a caller's struct of `$size` bytes) into `$dst` (a struct of defaults)
/// each listed field that fits whole in `$size`. The list must name every field of `$T`: the
/// pattern at the end does not compile otherwise.
macro_rules! read_fields {
    ($T:ident, $src:expr, $size:expr, $dst:ident, [$($f:ident),* $(,)?]) => {{
        $(
            // SAFETY: `$src` is non-NULL (checked by `input_size`); no read happens here.
            let field = unsafe { std::ptr::addr_of!((*$src).$f) };
            if std::mem::offset_of!($T, $f) + $crate::struct_size::size_of_pointee(field) <= $size {
                // SAFETY: inside the `$size` bytes the caller vouches for; unaligned reads
                // because the caller's struct may be anywhere.
                $dst.$f = unsafe { field.read_unaligned() };
            }
        )*
        let $T { $($f: _),* } = &$dst;
    }};
}

pub(crate) use read_fields;
