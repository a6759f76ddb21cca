//! The four batch compression codecs, in the framings Kafka's clients write.
//!
//! The data path never calls these: batches are stored as the producer compressed them. The
//! log cleaner does, to drop records from a compressed batch and compress the rest again with
//! the same codec. Decompression is bounded, so a small batch that inflates without limit
//! costs an error, not the shard's memory.
//!
//! Framings: gzip is a gzip stream; snappy is xerial's block framing (what the Java client
//! writes), with raw snappy accepted as the Java broker does; lz4 is the LZ4 frame format; zstd
//! a zstd frame.

use super::{BatchError, Compression};
use std::io::{Read, Write};

/// xerial snappy-java's stream header: magic, version 1, compatible version 1.
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// Uncompressed bytes per xerial block, as snappy-java writes them.
const XERIAL_BLOCK_BYTES: usize = 32 << 10;

fn bad(codec: Compression, reason: impl std::fmt::Display) -> BatchError {
    BatchError::BadCompressedData {
        reason: format!("{codec:?}: {reason}"),
    }
}

/// Decompresses a batch's record section; more than `limit` bytes of output is an error.
pub fn decompress(codec: Compression, data: &[u8], limit: usize) -> Result<Vec<u8>, BatchError> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => read_bounded(codec, flate2::read::GzDecoder::new(data), limit),
        Compression::Lz4 => {
            let decoder = lz4::Decoder::new(data).map_err(|e| bad(codec, e))?;
            read_bounded(codec, decoder, limit)
        }
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(data).map_err(|e| bad(codec, e))?;
            read_bounded(codec, decoder, limit)
        }
        Compression::Snappy => read_bounded(codec, super::stream::SnappyReader::new(data)?, limit),
    }
}

/// Compresses a record section with `codec`.
pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    let io = |e: std::io::Error| bad(codec, e);
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(data).map_err(io)?;
            encoder.finish().map_err(io)
        }
        Compression::Lz4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .block_mode(lz4::BlockMode::Independent)
                .build(Vec::new())
                .map_err(io)?;
            encoder.write_all(data).map_err(io)?;
            let (out, result) = encoder.finish();
            result.map_err(io)?;
            Ok(out)
        }
        Compression::Zstd => zstd::stream::encode_all(data, 3).map_err(io),
        Compression::Snappy => {
            let mut out = XERIAL_HEADER.to_vec();
            let mut encoder = snap::raw::Encoder::new();
            for block in data.chunks(XERIAL_BLOCK_BYTES) {
                let compressed = encoder.compress_vec(block).map_err(|e| bad(codec, e))?;
                out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
    }
}

fn read_bounded(
    codec: Compression,
    reader: impl Read,
    limit: usize,
) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| bad(codec, e))?;
    if out.len() > limit {
        return Err(bad(codec, format!("inflates beyond {limit} bytes")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODECS: [Compression; 5] = Compression::ALL;

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        for codec in CODECS {
            let packed = compress(codec, &data).unwrap();
            assert_eq!(
                decompress(codec, &packed, data.len()).unwrap(),
                data,
                "{codec:?}"
            );
        }
    }

    #[test]
    fn output_beyond_the_limit_is_refused() {
        let zeros = vec![0u8; 1 << 20];
        for codec in CODECS[1..].iter().copied() {
            let packed = compress(codec, &zeros).unwrap();
            let err = decompress(codec, &packed, 1000).unwrap_err();
            assert!(
                matches!(err, BatchError::BadCompressedData { .. }),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn raw_snappy_is_accepted_and_garbage_refused() {
        let data = b"hello hello hello hello".to_vec();
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw, 1 << 10).unwrap(),
            data
        );
        for codec in CODECS[1..].iter().copied() {
            assert!(decompress(
                codec,
                b"\x82SNAPPY\x00 this is not compressed data",
                1 << 10
            )
            .is_err());
        }
    }
}
