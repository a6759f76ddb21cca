//! A batch's record section as a stream of bytes, decompressed on the fly when the batch is
//! compressed, so that every record can be walked without holding the inflated section.
//!
//! Memory is bounded by the decoders' own windows plus one block (`STREAM_BUFFER_BYTES`, or
//! one snappy block), whatever the section inflates to; the inflated length is bounded by
//! `INFLATED_BYTES_MAX` so that a small batch cannot keep a shard busy for minutes.

use super::decoders::{Lz4Reader, ZstdReader};
use super::{BatchError, BatchHeader, Compression, HEADER_BYTES};
use std::io::Read;

/// Bytes read from a decoder at a time.
const STREAM_BUFFER_BYTES: usize = 32 << 10;
/// The most a record section may inflate to. Kafka sets no bound; one is needed because the
/// broker walks every record of every compressed batch (zstd and gzip can inflate a few KiB to
/// gigabytes). 1 GiB is ten times `socket.request.max.bytes`, far above what any producer's
/// batch holds.
pub const INFLATED_BYTES_MAX: u64 = 1 << 30;
/// Snappy cannot expand its input more than about 21 times (a 3-byte copy of 64 bytes); a
/// block that claims more is corrupt, and refusing it first keeps a lying length prefix from
/// sizing an allocation.
const SNAPPY_EXPANSION_MAX: usize = 24;

/// xerial snappy-java's stream magic, the first 8 of its 16 header bytes.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";

/// Where record bytes come from: the batch itself, or a decoder.
pub(crate) enum Section<'a> {
    Plain(Plain<'a>),
    Inflating(Inflating<'a>),
}

/// What the record walk reads from. Two implementations, so the walk is compiled once for
/// each and the byte-at-a-time varint reads of an uncompressed batch cost a bounds check.
pub(crate) trait RecordBytes {
    /// The next byte; `None` at the end of the section.
    fn byte(&mut self) -> Result<Option<u8>, BatchError>;
    /// Skips `n` bytes; false if the section ends first.
    fn skip(&mut self, n: usize) -> Result<bool, BatchError>;
    /// Bytes consumed so far, counted in the (inflated) section.
    fn position(&self) -> u64;
    /// True when no byte is left.
    fn at_end(&mut self) -> Result<bool, BatchError>;
}

/// An uncompressed record section, read in place.
pub(crate) struct Plain<'a> {
    buf: &'a [u8],
    at: usize,
}

pub(crate) struct Inflating<'a> {
    codec: Compression,
    decoder: Box<dyn Read + 'a>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Inflated bytes taken from the decoder so far.
    inflated: u64,
    inflated_bytes_max: u64,
    finished: bool,
}

impl<'a> Section<'a> {
    /// The record section of `batch` (which `header` describes).
    pub fn of(batch: &'a [u8], header: &BatchHeader) -> Result<Section<'a>, BatchError> {
        Section::bounded(batch, header, INFLATED_BYTES_MAX)
    }

    /// As `of`, inflating to at most `inflated_bytes_max`.
    fn bounded(
        batch: &'a [u8],
        header: &BatchHeader,
        inflated_bytes_max: u64,
    ) -> Result<Section<'a>, BatchError> {
        let codec = header
            .compression()
            .ok_or(BatchError::UnsupportedCompression {
                codec: (header.attributes & 0x7) as u16,
            })?;
        let data = &batch[HEADER_BYTES.min(batch.len())..];
        let decoder: Box<dyn Read + 'a> = match codec {
            Compression::None => return Ok(Section::Plain(Plain { buf: data, at: 0 })),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
            Compression::Lz4 => Box::new(Lz4Reader::new(data).map_err(|e| bad(codec, e))?),
            Compression::Zstd => Box::new(ZstdReader::new(data)),
            Compression::Snappy => Box::new(SnappyReader::new(data)?),
        };
        Ok(Section::Inflating(Inflating {
            codec,
            decoder,
            buf: vec![0; STREAM_BUFFER_BYTES],
            start: 0,
            end: 0,
            inflated: 0,
            inflated_bytes_max,
            finished: false,
        }))
    }
}

impl<'a> Plain<'a> {
    /// What is left to read.
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.buf[self.at.min(self.buf.len())..]
    }
}

impl RecordBytes for Plain<'_> {
    #[inline]
    fn byte(&mut self) -> Result<Option<u8>, BatchError> {
        let b = self.buf.get(self.at).copied();
        self.at += b.is_some() as usize;
        Ok(b)
    }

    #[inline]
    fn skip(&mut self, n: usize) -> Result<bool, BatchError> {
        match self.at.checked_add(n) {
            Some(end) if end <= self.buf.len() => {
                self.at = end;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    #[inline]
    fn position(&self) -> u64 {
        self.at as u64
    }

    fn at_end(&mut self) -> Result<bool, BatchError> {
        Ok(self.at >= self.buf.len())
    }
}

impl RecordBytes for Inflating<'_> {
    #[inline]
    fn byte(&mut self) -> Result<Option<u8>, BatchError> {
        if self.start == self.end && !self.refill()? {
            return Ok(None);
        }
        let b = self.buf[self.start];
        self.start += 1;
        Ok(Some(b))
    }

    fn skip(&mut self, n: usize) -> Result<bool, BatchError> {
        let mut left = n;
        while left > 0 {
            if self.start == self.end && !self.refill()? {
                return Ok(false);
            }
            let step = left.min(self.end - self.start);
            self.start += step;
            left -= step;
        }
        Ok(true)
    }

    fn position(&self) -> u64 {
        self.inflated - (self.end - self.start) as u64
    }

    fn at_end(&mut self) -> Result<bool, BatchError> {
        Ok(self.start == self.end && !self.refill()?)
    }
}

impl Inflating<'_> {
    /// Reads the next chunk from the decoder; false at its end.
    fn refill(&mut self) -> Result<bool, BatchError> {
        if self.finished {
            return Ok(false);
        }
        let n = loop {
            match self.decoder.read(&mut self.buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(bad(self.codec, e)),
            }
        };
        if n == 0 {
            self.finished = true;
            return Ok(false);
        }
        self.inflated += n as u64;
        if self.inflated > self.inflated_bytes_max {
            return Err(bad(
                self.codec,
                format!("inflates beyond {} bytes", self.inflated_bytes_max),
            ));
        }
        self.start = 0;
        self.end = n;
        Ok(true)
    }
}

fn bad(codec: Compression, reason: impl std::fmt::Display) -> BatchError {
    BatchError::BadCompressedData {
        reason: format!("{codec:?}: {reason}"),
    }
}

/// Snappy as Kafka's clients write it: xerial's framing (the Java client: a 16-byte header,
/// then blocks of `length u32, raw snappy`), or one raw snappy block (librdkafka), inflated a
/// block at a time.
pub(crate) struct SnappyReader<'a> {
    rest: &'a [u8],
    framed: bool,
    decoder: snap::raw::Decoder,
    block: Vec<u8>,
    at: usize,
}

impl<'a> SnappyReader<'a> {
    pub fn new(data: &'a [u8]) -> Result<SnappyReader<'a>, BatchError> {
        let (rest, framed) = match data.strip_prefix(&XERIAL_MAGIC[..]) {
            // Version and compatible-version words follow the magic.
            Some(after) => (
                after
                    .get(8..)
                    .ok_or_else(|| bad(Compression::Snappy, "truncated xerial header"))?,
                true,
            ),
            None => (data, false),
        };
        Ok(SnappyReader {
            rest,
            framed,
            decoder: snap::raw::Decoder::new(),
            block: Vec::new(),
            at: 0,
        })
    }

    /// Inflates the next block into `self.block`; false when none is left.
    fn next_block(&mut self) -> Result<bool, BatchError> {
        let codec = Compression::Snappy;
        if self.rest.is_empty() {
            return Ok(false);
        }
        let compressed = if self.framed {
            let (len, after) = self
                .rest
                .split_first_chunk::<4>()
                .ok_or_else(|| bad(codec, "truncated block length"))?;
            let len = u32::from_be_bytes(*len) as usize;
            let block = after
                .get(..len)
                .ok_or_else(|| bad(codec, "truncated block"))?;
            self.rest = &after[len..];
            block
        } else {
            std::mem::take(&mut self.rest)
        };
        let len = snap::raw::decompress_len(compressed).map_err(|e| bad(codec, e))?;
        if len > compressed.len().saturating_mul(SNAPPY_EXPANSION_MAX) + 64 {
            return Err(bad(
                codec,
                format!(
                    "a {}-byte block claims {len} bytes inflated",
                    compressed.len()
                ),
            ));
        }
        self.block.resize(len, 0);
        self.decoder
            .decompress(compressed, &mut self.block)
            .map_err(|e| bad(codec, e))?;
        self.at = 0;
        Ok(true)
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.block.len() {
            match self.next_block() {
                Ok(true) => {}
                Ok(false) => return Ok(0),
                Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            }
        }
        let n = out.len().min(self.block.len() - self.at);
        out[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::codec::compress;

    fn drain(s: Section<'_>) -> Result<Vec<u8>, BatchError> {
        fn all(s: &mut impl RecordBytes) -> Result<Vec<u8>, BatchError> {
            let mut out = Vec::new();
            while let Some(b) = s.byte()? {
                out.push(b);
            }
            Ok(out)
        }
        match s {
            Section::Plain(mut p) => all(&mut p),
            Section::Inflating(mut i) => all(&mut i),
        }
    }

    fn inflating(codec: Compression, packed: &[u8]) -> Section<'_> {
        let mut batch = vec![0u8; HEADER_BYTES];
        batch[21..23].copy_from_slice(&(codec as i16).to_be_bytes());
        batch.extend_from_slice(packed);
        let header = BatchHeader::parse(&batch).unwrap();
        let leaked: &'static [u8] = Box::leak(batch.into_boxed_slice());
        Section::of(leaked, &header).unwrap()
    }

    #[test]
    fn every_codec_streams_back_what_was_compressed() {
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 253).to_le_bytes())
            .collect();
        for codec in Compression::ALL {
            let packed = compress(codec, &data).unwrap();
            assert_eq!(drain(inflating(codec, &packed)).unwrap(), data, "{codec:?}");
        }
    }

    #[test]
    fn skip_and_position_count_inflated_bytes() {
        let data = vec![7u8; 100_000];
        let packed = compress(Compression::Zstd, &data).unwrap();
        let Section::Inflating(mut s) = inflating(Compression::Zstd, &packed) else {
            panic!("a compressed section inflates");
        };
        assert!(s.skip(99_999).unwrap());
        assert_eq!(s.position(), 99_999);
        assert_eq!(s.byte().unwrap(), Some(7));
        assert!(s.at_end().unwrap());
        assert!(!s.skip(1).unwrap());
    }

    #[test]
    fn raw_snappy_is_read_and_garbage_refused() {
        let data = b"hello hello hello hello".repeat(100);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(drain(inflating(Compression::Snappy, &raw)).unwrap(), data);
        let garbage = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09not snappy";
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut batch = vec![0u8; HEADER_BYTES];
            batch[21..23].copy_from_slice(&(codec as i16).to_be_bytes());
            batch.extend_from_slice(garbage);
            let header = BatchHeader::parse(&batch).unwrap();
            let result = Section::of(&batch, &header).and_then(drain);
            assert!(
                matches!(result, Err(BatchError::BadCompressedData { .. })),
                "{codec:?}: {result:?}"
            );
        }
    }

    #[test]
    fn a_section_inflating_beyond_its_bound_is_refused() {
        let zeros = vec![0u8; 1 << 20];
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let packed = compress(codec, &zeros).unwrap();
            let mut batch = vec![0u8; HEADER_BYTES];
            batch[21..23].copy_from_slice(&(codec as i16).to_be_bytes());
            batch.extend_from_slice(&packed);
            let header = BatchHeader::parse(&batch).unwrap();
            let within = Section::bounded(&batch, &header, 1 << 20).and_then(drain);
            assert_eq!(within.unwrap().len(), 1 << 20, "{codec:?}");
            let beyond = Section::bounded(&batch, &header, 100_000).and_then(drain);
            assert!(
                matches!(beyond, Err(BatchError::BadCompressedData { .. })),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn a_snappy_block_claiming_more_than_snappy_can_expand_is_refused() {
        // A varint length prefix of 2^28 bytes, then four bytes of "data".
        let lying = [0x80, 0x80, 0x80, 0x80, 0x01, 0, 0, 0, 0];
        let err = drain(inflating(Compression::Snappy, &lying)).unwrap_err();
        assert!(
            matches!(err, BatchError::BadCompressedData { .. }),
            "{err:?}"
        );
    }
}
