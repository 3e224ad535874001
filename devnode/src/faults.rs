//! Fault decisions: which request gets a 429, a 5xx, a drop, latency, a lagging backend, an error, which
//! `eth_getLogs` answer repeats its logs.
//!
//! Each decision is a pure function of `(seed, request counter, call index)`, so the same sequence of requests
//! meets the same faults on every run. The rate limits, the one kind of fault driven by the clock because they
//! model exactly that, are `credits`'s. This module decides; the server and the dispatcher act.

use std::time::Duration;

use super::chain::Log;
use super::config::FaultConfig;
use super::rng::{hash3, Rng};

const TAG_REQUEST: u64 = 101;
const TAG_CALL: u64 = 102;

/// What happens to one request before its calls are answered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RequestFaults {
    /// Answer with this HTTP status instead (429, 500, 502 or 503).
    pub(crate) status: Option<u16>,
    /// Cut the response off midway.
    pub(crate) drop: bool,
    /// Wait this long first.
    pub(crate) delay: Duration,
    /// Serve from a backend this many blocks behind.
    pub(crate) lag: u64,
}

/// Decides the faults of request number `seq`.
pub(crate) fn for_request(seed: u64, seq: u64, faults: &FaultConfig) -> RequestFaults {
    let mut rng = Rng::new(hash3(seed, seq, 0, TAG_REQUEST));
    // Draw every roll unconditionally, so that enabling one fault does not shift the others' decisions.
    let (roll_429, roll_5xx, roll_drop, roll_lag) =
        (rng.unit(), rng.unit(), rng.unit(), rng.unit());
    let status_5xx = [500, 502, 503][rng.below(3) as usize];
    let jitter = faults.jitter.mul_f64(rng.unit());
    let status = if roll_429 < faults.http_429 {
        Some(429)
    } else if roll_5xx < faults.http_5xx {
        Some(status_5xx)
    } else {
        None
    };
    RequestFaults {
        status,
        drop: roll_drop < faults.drop,
        delay: faults.latency + jitter,
        lag: if roll_lag < faults.lag {
            faults.lag_depth
        } else {
            0
        },
    }
}

/// An error a call is answered with instead of its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallFault {
    /// `-32603` internal error.
    Internal,
    /// Infura's `-32005` "project ID request rate exceeded".
    RateLimit,
}

/// What happens to call `call_idx` of request `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CallFaults {
    pub(crate) error: Option<CallFault>,
    /// `eth_getLogs` is answered by a stale replica that still has the orphaned logs.
    pub(crate) stale_replica: bool,
    /// `eth_getLogs` answers its list of logs twice over (see [`Repeat`]).
    pub(crate) repeat: Option<Repeat>,
}

/// How an `eth_getLogs` answer repeats its logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// The whole list, then the same list again, as a node (or a proxy in front of two) that serves a
    /// range twice: every log twice, each copy identical, the second run starting over from the range's
    /// first block.
    Same,
    /// The answer's first log a second time right after it, at the same block and log index but with other
    /// data: two different logs claiming one position.
    Conflicting,
}

/// Decides the faults of one call.
pub(crate) fn for_call(seed: u64, seq: u64, call_idx: u64, faults: &FaultConfig) -> CallFaults {
    let mut rng = Rng::new(hash3(seed, seq, call_idx, TAG_CALL));
    let (roll_internal, roll_rate, roll_stale) = (rng.unit(), rng.unit(), rng.unit());
    // Drawn after the older rolls, so that those decide as they did before these faults existed.
    let (roll_repeat, roll_conflict) = (rng.unit(), rng.unit());
    let repeat = if roll_conflict < faults.conflicting_log {
        Some(Repeat::Conflicting)
    } else if roll_repeat < faults.repeated_logs {
        Some(Repeat::Same)
    } else {
        None
    };
    let error = if roll_internal < faults.internal_error {
        Some(CallFault::Internal)
    } else if roll_rate < faults.rate_limit_error {
        Some(CallFault::RateLimit)
    } else {
        None
    };
    CallFaults {
        error,
        stale_replica: roll_stale < faults.stale_replica,
        repeat,
    }
}

/// The [`Repeat::Same`] fault on an answer whose `n_logs` logs are written from `list_start` on (the list not
/// closed yet): the list again after itself. The range's cap counted them once. Returns the logs now written.
pub(crate) fn repeat_list(out: &mut Vec<u8>, list_start: usize, n_logs: u64) -> u64 {
    if n_logs == 0 {
        return 0;
    }
    let list_end = out.len();
    out.push(b',');
    out.extend_from_within(list_start..list_end);
    2 * n_logs
}

/// The [`Repeat::Conflicting`] fault: `log` becomes another log at its position (a word more of data).
pub(crate) fn conflicting(log: &mut Log) {
    log.data.extend([0xc0; 32]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_fault_is_drawn_when_every_probability_is_zero() {
        let faults = FaultConfig::default();
        for seq in 0..1000 {
            assert_eq!(for_request(7, seq, &faults), RequestFaults::default());
            assert_eq!(for_call(7, seq, 0, &faults), CallFaults::default());
        }
    }

    #[test]
    fn a_probability_is_met_about_as_often_as_it_says_and_the_same_way_twice() {
        let faults = FaultConfig {
            http_429: 0.25,
            ..FaultConfig::default()
        };
        let hits: Vec<bool> = (0..4000)
            .map(|seq| for_request(7, seq, &faults).status == Some(429))
            .collect();
        let again: Vec<bool> = (0..4000)
            .map(|seq| for_request(7, seq, &faults).status == Some(429))
            .collect();
        assert_eq!(hits, again);
        let n_hits = hits.iter().filter(|hit| **hit).count();
        assert!((800..1200).contains(&n_hits), "{n_hits}");
    }

    #[test]
    fn a_repeated_answer_carries_its_list_twice_in_one_array() {
        let mut out = br#"{"result":[{"logIndex":"0x0"},{"logIndex":"0x1"}"#.to_vec();
        let list_start = out.iter().position(|&b| b == b'[').unwrap() + 1;
        assert_eq!(repeat_list(&mut out, list_start, 2), 4);
        out.push(b']');
        let value: serde_json::Value = serde_json::from_slice(&[&out[..], b"}"].concat()).unwrap();
        let indexes: Vec<&str> = value["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|log| log["logIndex"].as_str().unwrap())
            .collect();
        assert_eq!(indexes, ["0x0", "0x1", "0x0", "0x1"]);
        let mut empty = b"[".to_vec();
        assert_eq!(repeat_list(&mut empty, 1, 0), 0);
        assert_eq!(empty, b"[");
    }
}
