//! CRC-32C (Castagnoli), the checksum of a v2 batch (Kafka's `Crc32C`), computed once for
//! every batch a producer sends and for every batch the broker writes itself.
//!
//! crc-fast folds with the CPU's carry-less multiply (VPCLMULQDQ where there is AVX-512,
//! else PCLMULQDQ) and picks the path at run time: on this machine about twice as fast as the
//! crc32c crate's SSE4.2 path on a 94 KB batch, and faster down to a 61-byte control batch
//! (`perf/results/record-checks/2026-12-07-crc.txt`). The crc32c crate stays
//! the tests' independent reference.

/// The CRC-32C of `bytes`.
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    #[test]
    fn the_check_value_of_the_catalogue() {
        // CRC-32/ISCSI's check value: the CRC of "123456789".
        assert_eq!(super::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(super::crc32c(b""), 0);
    }

    proptest! {
        /// Any length and alignment, against the crc32c crate.
        #[test]
        fn agrees_with_the_reference_implementation(
            bytes in proptest::collection::vec(any::<u8>(), 0..5_000),
            skip in 0usize..64,
        ) {
            let slice = &bytes[skip.min(bytes.len())..];
            prop_assert_eq!(super::crc32c(slice), crc32c::crc32c(slice));
        }
    }
}
