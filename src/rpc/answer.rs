//! One JSON-RPC answer read: its `result` (with a seed, so that `eth_getLogs` can size its vector of logs
//! once) or its `error` object.

use std::marker::PhantomData;

use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::wire_log::{DataArena, LogSeed};
use super::{Error, Log};

/// About the fewest bytes a log object takes in an answer (two hashes, an address and the member names:
/// 310-330 without topics or data), so that an answer's length over it is about its most logs. An answer
/// of smaller objects only grows its vector, as it always did.
const MIN_LOG_JSON_BYTES: usize = 320;

/// Reads an answer whose `result` is a `T`.
///
/// # Errors
/// [`Error::Rpc`] for an error object; [`Error::Malformed`] for anything that is not an answer.
pub(super) fn parse_response<T: DeserializeOwned>(
    method: &'static str,
    body: &[u8],
) -> Result<T, Error> {
    parse_with(method, body, PhantomData::<T>)
}

/// Reads an answer of `eth_getLogs`: as [`parse_response`], with the vector of logs allocated once, for
/// as many logs as the answer's length can hold. Grown a log at a time it was copied over and over, about
/// a tenth of the thread that parses answers on the default chain; the capacity it does not use is never
/// written, so it costs address space, not memory.
///
/// # Errors
/// As [`parse_response`].
pub(super) fn parse_logs(method: &'static str, body: &[u8]) -> Result<Vec<Log>, Error> {
    parse_with(
        method,
        body,
        Logs {
            capacity: body.len() / MIN_LOG_JSON_BYTES,
            answer_len: body.len(),
        },
    )
}

fn parse_with<'de, S: DeserializeSeed<'de>>(
    method: &'static str,
    body: &'de [u8],
    result: S,
) -> Result<S::Value, Error> {
    let malformed = |detail: String| Error::Malformed { method, detail };
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let (result, error) = Answer(result)
        .deserialize(&mut deserializer)
        .and_then(|answer| deserializer.end().map(|()| answer))
        .map_err(|e| malformed(e.to_string()))?;
    if let Some(error) = error {
        return Err(Error::Rpc {
            code: error.code,
            message: error.message,
            data: error.data.map(|d| d.get().to_owned()),
        });
    }
    result.ok_or_else(|| malformed("neither result nor error".into()))
}

#[derive(Deserialize)]
struct ErrorObject {
    code: i64,
    #[serde(default)]
    message: String,
    #[serde(default)]
    data: Option<Box<RawValue>>,
}

/// The members of an answer this client reads.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Member {
    Result,
    Error,
    #[serde(other)]
    Other,
}

/// An answer object: `result`, read with the seed, when present (even as `null`, which a `T = Option<_>`
/// reads as `None`); `error` when present and not `null`; any other member skipped.
struct Answer<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Answer<S> {
    type Value = (Option<S::Value>, Option<ErrorObject>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Answer<S> {
    type Value = (Option<S::Value>, Option<ErrorObject>);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON-RPC answer object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seed = Some(self.0);
        let (mut result, mut error) = (None, None);
        while let Some(member) = map.next_key()? {
            match member {
                Member::Result => {
                    let seed = seed
                        .take()
                        .ok_or_else(|| serde::de::Error::duplicate_field("result"))?;
                    result = Some(map.next_value_seed(seed)?);
                }
                Member::Error => error = map.next_value::<Option<ErrorObject>>()?,
                Member::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((result, error))
    }
}

/// A list of logs read into a vector of `capacity`, their data into one [`DataArena`].
struct Logs {
    capacity: usize,
    answer_len: usize,
}

impl<'de> DeserializeSeed<'de> for Logs {
    type Value = Vec<Log>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Logs {
    type Value = Vec<Log>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of logs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut logs = Vec::with_capacity(self.capacity);
        let mut arena = DataArena::new(self.answer_len);
        while let Some(log) = seq.next_element_seed(LogSeed(&mut arena))? {
            logs.push(log.into_log()?);
        }
        Ok(logs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_json(index: u64) -> String {
        format!(
            r#"{{"address":"0x{a}","topics":["0x{t}"],"data":"0x","blockNumber":"0x1","transactionHash":"0x{t}","transactionIndex":"0x0","blockHash":"0x{t}","logIndex":"{index:#x}","removed":false}}"#,
            a = "ab".repeat(20),
            t = "cd".repeat(32),
        )
    }

    #[test]
    fn an_answer_of_logs_reads_as_the_generic_one_and_its_vector_is_sized_once() {
        let logs: Vec<String> = (0..50).map(log_json).collect();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":[{}]}}"#,
            logs.join(",")
        );
        let sized = parse_logs("eth_getLogs", body.as_bytes()).unwrap();
        let generic: Vec<Log> = parse_response("eth_getLogs", body.as_bytes()).unwrap();
        assert_eq!(sized, generic);
        assert_eq!(sized.len(), 50);
        assert!(
            sized.capacity() >= 50 && sized.capacity() <= body.len() / MIN_LOG_JSON_BYTES,
            "the smallest log object is under MIN_LOG_JSON_BYTES: {} for {} bytes",
            sized.capacity(),
            body.len()
        );
    }

    /// A log object of `data` (hex digits, `0x` added).
    fn log_with_data(index: u64, data: &str) -> String {
        log_json(index).replace(r#""data":"0x""#, &format!(r#""data":"0x{data}""#))
    }

    fn answer(logs: &[String]) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":[{}]}}"#,
            logs.join(",")
        )
    }

    #[test]
    fn an_answer_s_data_is_decoded_into_shared_chunks_and_reads_as_the_generic_one() {
        let lengths = [0, 1, 32, 5, 100, 70_000, 32, 0, 64];
        let logs: Vec<String> = lengths
            .iter()
            .zip(0u64..)
            .map(|(&len, i)| log_with_data(i, &format!("{:02x}", i + 1).repeat(len)))
            .collect();
        let body = answer(&logs);
        let shared = parse_logs("eth_getLogs", body.as_bytes()).unwrap();
        let generic: Vec<Log> = parse_response("eth_getLogs", body.as_bytes()).unwrap();
        assert_eq!(shared, generic);
        for (log, &len) in shared.iter().zip(&lengths) {
            assert_eq!(log.data.len(), len);
            assert!(log.data.iter().all(|&b| u64::from(b) == log.log_index + 1));
        }
        // The data of consecutive logs lies end to end in one chunk: one allocation, not one per log.
        let follows = |a: usize, b: usize| {
            shared[a].data.as_ptr().wrapping_add(shared[a].data.len()) == shared[b].data.as_ptr()
        };
        assert!(follows(1, 2) && follows(2, 3) && follows(3, 4));
        // Data larger than a chunk gets an allocation of its own; the logs after it share a new chunk (an
        // empty log's data takes none).
        assert!(follows(6, 8));
    }

    #[test]
    fn malformed_data_in_an_answer_is_named_as_the_generic_reading_names_it() {
        for data in ["abc", "zz", "0x12"] {
            let body = answer(&[log_with_data(0, "00"), log_with_data(1, data)]);
            let shared = parse_logs("eth_getLogs", body.as_bytes()).unwrap_err();
            let generic = parse_response::<Vec<Log>>("eth_getLogs", body.as_bytes()).unwrap_err();
            let (Error::Malformed { detail: a, .. }, Error::Malformed { detail: b, .. }) =
                (&shared, &generic)
            else {
                panic!("{shared:?} / {generic:?}");
            };
            assert_eq!(a, b);
            assert!(a.contains("log data"), "{a}");
        }
    }

    #[test]
    fn members_come_in_any_order_and_twice_is_malformed() {
        let first = br#"{"result":[],"id":1,"jsonrpc":"2.0","extra":{"a":[1,2]}}"#;
        assert_eq!(parse_logs("eth_getLogs", first).unwrap(), Vec::new());
        let error_null = br#"{"jsonrpc":"2.0","error":null,"result":"0x5","id":1}"#;
        assert_eq!(
            parse_response::<super::super::Quantity>("eth_chainId", error_null)
                .unwrap()
                .0,
            5
        );
        let twice = br#"{"result":[],"result":[]}"#;
        assert!(matches!(
            parse_logs("eth_getLogs", twice),
            Err(Error::Malformed { .. })
        ));
        let trailing = br#"{"result":[]} x"#;
        assert!(matches!(
            parse_logs("eth_getLogs", trailing),
            Err(Error::Malformed { .. })
        ));
    }
}
