//! LZ4 as magic 0 message sets carry it. Kafka before 0.10 computed the frame descriptor's
//! header checksum over the magic number too (KAFKA-3160); magic 1 and v2 batches carry the
//! standard checksum. Readers of magic 0 must accept the old one, and writers of magic 0 must
//! write it, as Kafka's `Lz4BlockOutputStream(useBrokenFlagDescriptorChecksum)` does.

use crate::batch::{BatchError, Compression};

/// The LZ4 frame magic number, little-endian on the wire.
const FRAME_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
/// FLG bits: a content size (8 bytes) and a dictionary id (4 bytes) follow BD.
const FLG_CONTENT_SIZE: u8 = 0x08;
const FLG_DICTIONARY_ID: u8 = 0x01;

/// Where the header checksum byte sits in `frame`; `None` if the header is not whole.
fn header_checksum_at(frame: &[u8]) -> Option<usize> {
    if frame.get(..4)? != FRAME_MAGIC {
        return None;
    }
    let flg = *frame.get(4)?;
    let mut at = 6; // magic, FLG, BD
    if flg & FLG_CONTENT_SIZE != 0 {
        at += 8;
    }
    if flg & FLG_DICTIONARY_ID != 0 {
        at += 4;
    }
    (at < frame.len()).then_some(at)
}

/// The checksum byte over `frame[from..at]`, as the frame format defines it.
fn checksum(frame: &[u8], from: usize, at: usize) -> u8 {
    ((xxh32(&frame[from..at], 0) >> 8) & 0xff) as u8
}

/// A copy of a magic 0 frame's header with the standard checksum, for a standard decoder:
/// Kafka ignores the descriptor checksum of magic 0 frames, so any value is accepted.
pub fn standard_header(frame: &[u8]) -> Result<Vec<u8>, BatchError> {
    let at = header_checksum_at(frame).ok_or_else(|| BatchError::BadCompressedData {
        reason: format!("{:?}: not an LZ4 frame", Compression::Lz4),
    })?;
    let mut header = frame[..=at].to_vec();
    header[at] = checksum(frame, 4, at);
    Ok(header)
}

/// Rewrites the header checksum of a standard frame the way magic 0 readers expect it.
pub fn write_magic_v0_checksum(frame: &mut [u8]) {
    if let Some(at) = header_checksum_at(frame) {
        frame[at] = checksum(frame, 0, at);
    }
}

const PRIME1: u32 = 2_654_435_761;
const PRIME2: u32 = 2_246_822_519;
const PRIME3: u32 = 3_266_489_917;
const PRIME4: u32 = 668_265_263;
const PRIME5: u32 = 374_761_393;

/// XXH32, the hash the LZ4 frame format uses for its checksums.
fn xxh32(data: &[u8], seed: u32) -> u32 {
    let round = |acc: u32, lane: u32| {
        acc.wrapping_add(lane.wrapping_mul(PRIME2))
            .rotate_left(13)
            .wrapping_mul(PRIME1)
    };
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let mut rest = data;
    let mut h = if data.len() >= 16 {
        let mut v = [
            seed.wrapping_add(PRIME1).wrapping_add(PRIME2),
            seed.wrapping_add(PRIME2),
            seed,
            seed.wrapping_sub(PRIME1),
        ];
        while rest.len() >= 16 {
            for (i, lane) in v.iter_mut().enumerate() {
                *lane = round(*lane, word(&rest[i * 4..]));
            }
            rest = &rest[16..];
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(PRIME5)
    };
    h = h.wrapping_add(data.len() as u32);
    while rest.len() >= 4 {
        h = h
            .wrapping_add(word(rest).wrapping_mul(PRIME3))
            .rotate_left(17)
            .wrapping_mul(PRIME4);
        rest = &rest[4..];
    }
    for &b in rest {
        h = h
            .wrapping_add((b as u32).wrapping_mul(PRIME5))
            .rotate_left(11)
            .wrapping_mul(PRIME1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(PRIME2);
    h ^= h >> 13;
    h = h.wrapping_mul(PRIME3);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::codec::{compress, decompress};

    #[test]
    fn xxh32_matches_the_reference_vectors() {
        assert_eq!(xxh32(b"", 0), 0x02cc_5d05);
        assert_eq!(xxh32(b"a", 0), 0x550d_7456);
        assert_eq!(xxh32(b"abc", 0), 0x32d1_53ff);
        assert_eq!(
            xxh32(b"Nobody inspects the spammish repetition", 0),
            0xe229_3b2f
        );
    }

    #[test]
    fn the_standard_checksum_is_what_lz4_itself_writes() {
        let frame = compress(Compression::Lz4, b"some bytes to frame").unwrap();
        let at = header_checksum_at(&frame).unwrap();
        assert_eq!(frame[at], checksum(&frame, 4, at));
    }

    #[test]
    fn a_magic_v0_frame_reads_back_through_its_standard_header() {
        let data = b"magic zero lz4, magic zero lz4, magic zero lz4".repeat(20);
        let mut frame = compress(Compression::Lz4, &data).unwrap();
        write_magic_v0_checksum(&mut frame);
        assert!(
            decompress(Compression::Lz4, &frame, 1 << 20).is_err(),
            "the old checksum is not a standard frame"
        );
        let header = standard_header(&frame).unwrap();
        let fixed = [&header[..], &frame[header.len()..]].concat();
        assert_eq!(decompress(Compression::Lz4, &fixed, 1 << 20).unwrap(), data);
    }
}
