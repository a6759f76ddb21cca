//! Choosing a partition the way Kafka's Java client does.

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`), seed 0x9747b28c.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = 0x9747_b28c ^ len as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= (rest[2] as u32) << 16;
    }
    if rest.len() >= 2 {
        h ^= (rest[1] as u32) << 8;
    }
    if !rest.is_empty() {
        h ^= rest[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The Java client's default partition for a key: `toPositive(murmur2(key)) % partitions`.
pub fn partition_for_key(key: &[u8], partitions: usize) -> usize {
    ((murmur2(key) as u32 & 0x7fff_ffff) as usize) % partitions
}

/// How records pick partitions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Partitioner {
    /// Keyless records in turn over the partitions.
    RoundRobin,
    /// Keyless records to one partition until its batch is full, then to the next in turn:
    /// the batches a Kafka Java producer sends by default (KIP-480's sticky partitioner, and
    /// KIP-794's uniform one, which switches after `batch.size` bytes to a partition).
    Sticky,
    /// By the murmur2 hash of the key (`--keys` names how many distinct keys).
    Hash,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases of Kafka's own `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_kafkas_java_client() {
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (input, want) in cases {
            assert_eq!(
                murmur2(input),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        assert_eq!(
            partition_for_key(b"foobar", 4),
            (-790_332_482i32 as u32 & 0x7fff_ffff) as usize % 4
        );
    }
}
