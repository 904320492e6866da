//! The template interpreter's code range, from `AbstractInterpreter::_code`, once HotSpot has
//! generated it and given back the unused tail of its buffer.

use super::memory::{array_at, word, Memory};
use super::vmstructs::VmStructs;
use super::HotSpotError;

/// Bytes a StubQueue's buffer may extend past its code once its unused tail was given back:
/// under a code heap segment (128 bytes). Before, the tail is tens of kilobytes (187 KB on JDK 21).
const TRIMMED_TAIL: i64 = 4096;

/// `AbstractInterpreter::_code`, a StubQueue: `[_stub_buffer, _stub_buffer + _buffer_limit)`.
///
/// HotSpot makes the queue as large as any interpreter may need, generates the interpreter into
/// it, then gives the unused tail back to the code heap, where stubs and adapters go later. Read
/// before that (`_queue_end`, the end of the code generated, still far from `_buffer_limit`), the
/// range would hold that tail, and later code there would be taken for interpreted frames:
/// `NotReady` until the tail is given back.
pub fn read(mem: &dyn Memory, vm: &VmStructs) -> Result<(u64, u64), HotSpotError> {
    let code_var = vm.static_address("AbstractInterpreter", "_code")?;
    let unreadable = |addr| HotSpotError::Unreadable {
        what: "the interpreter's StubQueue",
        addr,
    };
    let queue = mem.read_u64(code_var).ok_or(unreadable(code_var))?;
    if queue == 0 {
        return Err(HotSpotError::NotReady(
            "the interpreter is not generated yet".into(),
        ));
    }
    let size = vm.require_size("StubQueue")?;
    let bytes = mem
        .read_bytes(queue, size as usize)
        .ok_or(unreadable(queue))?;
    let buffer = word(&bytes, vm.offset(&["StubQueue"], "_stub_buffer", 8)?);
    let int = |field| -> Result<Option<i32>, HotSpotError> {
        Ok(array_at(&bytes, vm.offset(&["StubQueue"], field, 4)?).map(i32::from_ne_bytes))
    };
    let (limit, end) = (int("_buffer_limit")?, int("_queue_end")?);
    match (buffer, limit, end) {
        (Some(begin), Some(limit), Some(end))
            if begin != 0 && end > 0 && i64::from(limit) - i64::from(end) < TRIMMED_TAIL =>
        {
            begin
                .checked_add(u64::from(limit.max(end).unsigned_abs()))
                .map(|end| (begin, end))
                .ok_or_else(|| {
                    HotSpotError::BadTable(format!("the interpreter at {begin:#x} wraps around"))
                })
        }
        _ => Err(HotSpotError::NotReady(
            "the interpreter is being generated".into(),
        )),
    }
}
