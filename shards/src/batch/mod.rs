//! The Kafka record batch, magic v2, read from its 61-byte header alone.
//!
//! Layout (big-endian), offsets in bytes:
//!
//! ```text
//!  0 baseOffset i64        ┐ not covered by the CRC: the broker writes them in place
//!  8 batchLength i32       │ (bytes after this field)
//! 12 partitionLeaderEpoch  ┘
//! 16 magic i8 (= 2)
//! 17 crc u32               CRC-32C of bytes 21..end
//! 21 attributes i16        bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control
//! 23 lastOffsetDelta i32
//! 27 baseTimestamp i64
//! 35 maxTimestamp i64
//! 43 producerId i64
//! 51 producerEpoch i16
//! 53 baseSequence i32
//! 57 recordCount i32
//! 61 records...
//! ```
//!
//! Offset assignment and indexing work from this header alone, and compressed batches stay
//! compressed on disk. A producer's batch is also walked record by record before it is
//! written (`record_checks`, decompressing as a stream), as Kafka's `LogValidator` does; the
//! bytes written are still the client's.

pub mod build;
mod clean_walk;
pub mod codec;
pub mod control;
pub mod crc;
mod decoders;
#[cfg(test)]
mod fuzz_tests;
pub mod legacy;
pub mod record_checks;
pub mod records;
mod stream;

use bytes::Bytes;

/// Bytes in the fixed part of a v2 batch.
pub const HEADER_BYTES: usize = 61;
/// baseOffset and batchLength: the part of a batch before the length-counted bytes.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The prefix the broker rewrites on append: baseOffset, batchLength, partitionLeaderEpoch.
pub const STAMP_BYTES: usize = 16;
pub const MAGIC_V2: u8 = 2;
const CRC_START: usize = 21;

/// The stamped prefix of a batch: baseOffset, batchLength (unchanged) and partitionLeaderEpoch.
pub type Stamp = [u8; STAMP_BYTES];

/// Compression codec from the low three attribute bits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// Every codec, in attribute order (the index is the codec's id).
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
}

/// Who produced the batch, which decides how strictly its offsets are checked.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BatchOrigin {
    /// A producer: every offset delta from 0 to lastOffsetDelta holds a record.
    Client,
    /// A leader replicating to us, or our own log on recovery: compaction may have left gaps.
    Replica,
}

/// Why a batch was refused. Each maps to one Kafka error code in the handlers.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("batch of {len} bytes is shorter than the {HEADER_BYTES}-byte header")]
    TooShort { len: usize },
    #[error("batch magic {magic}: only magic 2 is supported")]
    BadMagic { magic: u8 },
    #[error("batch length field says {declared} bytes but {available} are present")]
    LengthMismatch { declared: usize, available: usize },
    #[error("batch of {len} bytes is larger than max.message.bytes {max}")]
    TooLarge { len: usize, max: usize },
    #[error("batch CRC-32C {stored:#010x} does not match the computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("batch claims {record_count} records for a last offset delta of {last_offset_delta}")]
    BadRecordCount {
        record_count: i32,
        last_offset_delta: i32,
    },
    #[error("batch producer fields are inconsistent: id {producer_id}, epoch {producer_epoch}, sequence {base_sequence}")]
    BadProducerFields {
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    },
    #[error("batch uses compression codec {codec}, which does not exist")]
    UnsupportedCompression { codec: u16 },
    #[error("record set ends with {len} bytes that are not a whole batch")]
    TrailingBytes { len: usize },
    #[error("record set holds no batch")]
    Empty,
    #[error("batch records cannot be decompressed: {reason}")]
    BadCompressedData { reason: String },
    #[error("batch records are malformed at byte {at} of the record section")]
    BadRecords { at: usize },
    #[error("the base offset of a producer's batch must be 0, not {base_offset}")]
    NonZeroBaseOffset { base_offset: i64 },
    #[error("Clients are not allowed to write control records")]
    ControlBatchFromClient,
    #[error("old-format message set is corrupt: {reason}")]
    CorruptLegacyMessage { reason: String },
    #[error("old-format message set is invalid: {reason}")]
    InvalidLegacyMessage { reason: String },
    #[error("batch magic {magic} differs from the first batch's {first} in one record set")]
    MixedMagic { first: u8, magic: u8 },
    #[error("record {index} of the batch is malformed: {reason}")]
    MalformedRecord { index: i32, reason: &'static str },
    #[error("{count} records of the batch are refused; the first: {}", errors.first().map_or("", |e| e.message.as_str()))]
    RecordsRefused {
        /// The first `RECORD_ERRORS_MAX` refused records.
        errors: Vec<record_checks::RecordError>,
        /// Every refused record.
        count: usize,
    },
}

/// Where a batch's timestamps come from (attribute bit 3): Kafka's `message.timestamp.type`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's clock, per record.
    CreateTime,
    /// The broker's clock at append, for the whole batch (its maxTimestamp).
    LogAppendTime,
}

/// Attribute bit 3: the batch's timestamps are the broker's (LogAppendTime).
pub const LOG_APPEND_TIME_FLAG: i16 = 0x08;

/// The fixed fields of a v2 batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: u8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

impl BatchHeader {
    /// Reads the header fields; checks only that 61 bytes are there.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < HEADER_BYTES {
            return Err(BatchError::TooShort { len: buf.len() });
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, 0),
            batch_length: be_i32(buf, 8),
            partition_leader_epoch: be_i32(buf, 12),
            magic: buf[16],
            crc: be_i32(buf, 17) as u32,
            attributes: be_i16(buf, 21),
            last_offset_delta: be_i32(buf, 23),
            base_timestamp: be_i64(buf, 27),
            max_timestamp: be_i64(buf, 35),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_i16(buf, 51),
            base_sequence: be_i32(buf, 53),
            record_count: be_i32(buf, 57),
        })
    }

    /// The whole batch on disk: overhead plus the length-counted part.
    pub fn total_bytes(&self) -> usize {
        LOG_OVERHEAD_BYTES + self.batch_length.max(0) as usize
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    /// Offsets this batch occupies (lastOffsetDelta + 1).
    pub fn offset_count(&self) -> i64 {
        self.last_offset_delta as i64 + 1
    }

    pub fn compression(&self) -> Option<Compression> {
        Compression::ALL
            .get((self.attributes & 0x7) as usize)
            .copied()
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & LOG_APPEND_TIME_FLAG != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }

    /// True when the producer asked for idempotent delivery.
    pub fn is_idempotent(&self) -> bool {
        self.producer_id >= 0
    }

    /// The sequence number of the last record in the batch, wrapping as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let last = self.base_sequence as i64 + self.last_offset_delta as i64;
        (last % (i32::MAX as i64 + 1)) as i32
    }
}

/// Validates one batch that must span `buf` exactly, from its header and CRC alone, in the
/// order Kafka checks (`UnifiedLog.analyzeAndValidateRecords`, then
/// `LogValidator.validateBatch`): framing, base offset, size, CRC, codec, then the fields
/// only a producer's batch must get right.
pub fn validate(
    buf: &[u8],
    max_batch_bytes: usize,
    origin: BatchOrigin,
) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    if header.magic != MAGIC_V2 {
        return Err(BatchError::BadMagic {
            magic: header.magic,
        });
    }
    if header.batch_length < 0 || header.total_bytes() != buf.len() {
        return Err(BatchError::LengthMismatch {
            declared: LOG_OVERHEAD_BYTES.saturating_add(header.batch_length.max(0) as usize),
            available: buf.len(),
        });
    }
    if origin == BatchOrigin::Client && header.base_offset != 0 {
        return Err(BatchError::NonZeroBaseOffset {
            base_offset: header.base_offset,
        });
    }
    if buf.len() > max_batch_bytes {
        return Err(BatchError::TooLarge {
            len: buf.len(),
            max: max_batch_bytes,
        });
    }
    let computed = crc::crc32c(&buf[CRC_START..]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    if header.compression().is_none() {
        return Err(BatchError::UnsupportedCompression {
            codec: (header.attributes & 0x7) as u16,
        });
    }
    check_record_count(&header, origin)?;
    if origin == BatchOrigin::Client {
        if header.is_control() {
            return Err(BatchError::ControlBatchFromClient);
        }
        check_producer_fields(&header)?;
    }
    Ok(header)
}

fn check_record_count(header: &BatchHeader, origin: BatchOrigin) -> Result<(), BatchError> {
    let bad = BatchError::BadRecordCount {
        record_count: header.record_count,
        last_offset_delta: header.last_offset_delta,
    };
    if header.last_offset_delta < 0 || header.record_count < 0 {
        return Err(bad);
    }
    let consistent = match origin {
        BatchOrigin::Client => header.record_count as i64 == header.offset_count(),
        BatchOrigin::Replica => header.record_count as i64 <= header.offset_count(),
    };
    if !consistent {
        return Err(bad);
    }
    Ok(())
}

/// Kafka checks a producer's fields only when it has a producer id (`producerId > -1`): then
/// the batch needs a sequence. Epoch rules belong to the producer table (INVALID_PRODUCER_EPOCH).
/// A plain producer's epoch and sequence are not looked at: clients send -1, 0 or anything.
fn check_producer_fields(header: &BatchHeader) -> Result<(), BatchError> {
    if header.producer_id >= 0 && header.base_sequence < 0 {
        return Err(BatchError::BadProducerFields {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
        });
    }
    Ok(())
}

/// The whole batches of a producer's record set, each a zero-copy slice. A partial batch
/// after the last whole one is dropped, as Kafka drops it (`UnifiedLog.trimInvalidBytes`);
/// a length field that cannot be a batch is an error.
pub fn whole_batches(records: &Bytes) -> Result<Vec<Bytes>, BatchError> {
    let mut batches = Vec::new();
    let mut at = 0usize;
    while records.len() - at >= LOG_OVERHEAD_BYTES {
        let declared = be_i32(&records[at..], 8);
        if declared < (HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32 {
            return Err(BatchError::LengthMismatch {
                declared: LOG_OVERHEAD_BYTES + declared.max(0) as usize,
                available: records.len() - at,
            });
        }
        let total = LOG_OVERHEAD_BYTES + declared as usize;
        if total > records.len() - at {
            break;
        }
        batches.push(records.slice(at..at + total));
        at += total;
    }
    if batches.is_empty() {
        return Err(BatchError::Empty);
    }
    Ok(batches)
}

/// A copy of `batch` with its timestamp type and maxTimestamp set and its CRC recomputed, as
/// Kafka's `DefaultRecordBatch.setMaxTimestamp` rewrites them.
pub fn with_max_timestamp(
    batch: &[u8],
    timestamp_type: TimestampType,
    max_timestamp: i64,
) -> Bytes {
    debug_assert!(batch.len() >= HEADER_BYTES);
    let mut out = batch.to_vec();
    let mut attributes = be_i16(&out, 21) & !LOG_APPEND_TIME_FLAG;
    if timestamp_type == TimestampType::LogAppendTime {
        attributes |= LOG_APPEND_TIME_FLAG;
    }
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(out)
}

/// Splits a record set (one partition's `records` in a Produce request) into its batches,
/// each a zero-copy slice of `records`. Lengths are checked; contents are not.
pub fn split_batches(records: &Bytes) -> Result<Vec<Bytes>, BatchError> {
    let mut batches = Vec::new();
    let mut at = 0usize;
    while at < records.len() {
        let rest = &records[at..];
        if rest.len() < LOG_OVERHEAD_BYTES {
            return Err(BatchError::TrailingBytes { len: rest.len() });
        }
        let declared = be_i32(rest, 8);
        if declared < 0 {
            return Err(BatchError::LengthMismatch {
                declared: 0,
                available: rest.len(),
            });
        }
        let total = LOG_OVERHEAD_BYTES + declared as usize;
        if total > rest.len() {
            return Err(BatchError::LengthMismatch {
                declared: total,
                available: rest.len(),
            });
        }
        batches.push(records.slice(at..at + total));
        at += total;
    }
    if batches.is_empty() {
        return Err(BatchError::Empty);
    }
    Ok(batches)
}

/// The stamped prefix for a batch given its assigned base offset and the leader epoch.
pub fn stamp(batch: &[u8], base_offset: i64, leader_epoch: i32) -> Stamp {
    debug_assert!(batch.len() >= HEADER_BYTES);
    let mut prefix = [0u8; STAMP_BYTES];
    prefix[0..8].copy_from_slice(&base_offset.to_be_bytes());
    prefix[8..12].copy_from_slice(&batch[8..12]);
    prefix[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
    prefix
}

#[cfg(test)]
mod tests;
