//! # selectjit
//!
//! Tensor **Select / Where** — `out[i] = cond[i] ? then[i] : else[i]` — with the broadcast modes of
//! ONNX Where, OpenVINO Select-1 and oneDNN Graph Select, bit-exact for every element type.
//!
//! ```
//! use selectjit::{Broadcast, Engine, TensorMut, TensorRef};
//!
//! // The ONNX Where example: cond [[1,0],[1,1]], x [[1,2],[3,4]], y [[9,8],[7,6]].
//! let engine = Engine::new();
//! let mut out = [0i64; 4];
//! engine.select(
//!     TensorRef::new(&[1, 0, 1, 1], &[2, 2]),
//!     TensorRef::new(&[1i64, 2, 3, 4], &[2, 2]),
//!     TensorRef::new(&[9i64, 8, 7, 6], &[2, 2]),
//!     TensorMut::new(&mut out, &[2, 2]),
//!     Broadcast::Numpy,
//! )?;
//! assert_eq!(out, [1, 8, 3, 4]);
//!
//! // Broadcasting: a scalar `else` and a row `cond`; any non-zero cond byte is true.
//! let mut out = [0f32; 6];
//! selectjit::select(
//!     TensorRef::new(&[0, 0xff, 2], &[3]),
//!     TensorRef::new(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]),
//!     TensorRef::scalar(&[-0.0f32]),
//!     TensorMut::new(&mut out, &[2, 3]),
//!     Broadcast::Numpy,
//! )?;
//! assert_eq!(out.map(f32::to_bits), [-0.0f32, 2.0, 3.0, -0.0, 5.0, 6.0].map(f32::to_bits));
//! # Ok::<(), selectjit::Error>(())
//! ```

pub mod aot;
pub mod bench;
pub mod cache;
pub mod capi;
pub mod dtype;
pub mod engine;
pub mod error;
pub mod explain;
pub(crate) mod interp;
pub mod jit;
pub mod kernels;
pub mod npy;
pub mod plan;
mod pool;
pub mod roofline;
pub mod shape;
mod split;
pub mod tensor;

pub use cache::CacheStats;
pub use dtype::{DType, Element};
pub use engine::{Backend, Engine, EngineConfig, InPlace, Prepared, select_generic};
pub use error::{Error, Result};
pub use shape::{Broadcast, Dims, MAX_RANK, broadcast_shapes, output_shape};
pub use tensor::{TensorMut, TensorRef};

/// The process-wide engine used by [`select`].
pub fn default_engine() -> &'static Engine {
    static ENGINE: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(Engine::new)
}

/// `out = cond ? then : else` on the process-wide default engine. See [`Engine::select`].
pub fn select<T: Element>(
    cond: TensorRef<'_, u8>,
    then: TensorRef<'_, T>,
    else_: TensorRef<'_, T>,
    out: TensorMut<'_, T>,
    mode: Broadcast,
) -> Result<()> {
    default_engine().select(cond, then, else_, out, mode)
}
