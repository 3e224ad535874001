//! Rate limits as providers meter them: calls per second (each item of a batch is a call) and credits per
//! second (compute units, weighed by method), over a fixed one-second window.
//!
//! [`MethodCredits`] is the price list, [`cost`] prices a request body, and [`Meter`] admits or refuses a
//! request as a whole: a batch over the remaining budget is refused entire, and a refused request costs
//! nothing, as a provider answering 429 does not bill the calls it refused. The meter follows the clock
//! (tokio's, so tests can pause it); the server acts on its answer.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use tokio::time::Instant;

use super::config::FaultConfig;

/// The window both limits count over.
const WINDOW: Duration = Duration::from_secs(1);

/// Credits of a method the table does not name, by default (one provider's price of most methods).
pub const DEFAULT_METHOD_CREDITS: u32 = 26;

/// The default price list: one large provider's compute units for the methods an indexer calls.
const DEFAULT_TABLE: &[(&str, u32)] = &[
    ("eth_getLogs", 75),
    ("eth_getBlockByNumber", 16),
    ("eth_getBlockReceipts", 500),
    ("eth_getTransactionReceipt", 15),
    ("eth_blockNumber", 10),
    ("eth_chainId", 0),
];

/// What each JSON-RPC method costs against [`FaultConfig::max_cps`]: a price per named method and one for
/// every other. The default is one large provider's list (`eth_getLogs` 75, `eth_getBlockByNumber` 16,
/// `eth_getBlockReceipts` 500, `eth_getTransactionReceipt` 15, `eth_blockNumber` 10, `eth_chainId` 0) and
/// [`DEFAULT_METHOD_CREDITS`] for the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodCredits {
    /// Credits of each named method.
    pub per_method: BTreeMap<String, u32>,
    /// Credits of any method not in `per_method` (and of a call without a method).
    pub default: u32,
}

impl Default for MethodCredits {
    fn default() -> Self {
        Self {
            per_method: DEFAULT_TABLE
                .iter()
                .map(|(method, credits)| ((*method).to_owned(), *credits))
                .collect(),
            default: DEFAULT_METHOD_CREDITS,
        }
    }
}

impl MethodCredits {
    /// Parses `eth_getLogs:75,eth_getBlockByNumber:16,default:26`: the whole table, replacing the default
    /// one; `default` is [`DEFAULT_METHOD_CREDITS`] unless given.
    ///
    /// # Errors
    /// A message naming the entry that is not `METHOD:CREDITS`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut credits = Self {
            per_method: BTreeMap::new(),
            default: DEFAULT_METHOD_CREDITS,
        };
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let parsed = entry
                .split_once(':')
                .map(|(method, n)| (method.trim(), n.trim().parse::<u32>()));
            match parsed {
                Some(("default", Ok(n))) => credits.default = n,
                Some((method, Ok(n))) if !method.is_empty() => {
                    credits.per_method.insert(method.to_owned(), n);
                }
                _ => {
                    return Err(format!(
                        "{entry:?} is not METHOD:CREDITS (e.g. eth_getLogs:75,default:26)"
                    ))
                }
            }
        }
        Ok(credits)
    }

    /// The credits one call of `method` costs (`None`: a call without a method name).
    pub fn of(&self, method: Option<&str>) -> u32 {
        method
            .and_then(|method| self.per_method.get(method))
            .copied()
            .unwrap_or(self.default)
    }
}

/// What one request costs: its calls (the items of a batch, else one) and their credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Cost {
    pub(crate) calls: u64,
    pub(crate) credits: u64,
}

/// The method name of one call, if it has a string one; anything else in the call is skipped unread.
#[derive(Default)]
struct CallMethod(Option<String>);

/// A value that is a string, or `None` for any other JSON value (skipped unread).
#[derive(Default)]
struct MaybeString(Option<String>);

/// The `visit_*` methods of scalars a visitor skips: each gives the default value.
macro_rules! skip_scalars {
    ($($visit:ident($ty:ty)),*) => {
        $(fn $visit<E: serde::de::Error>(self, _: $ty) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        })*
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Self::Value::default())
        }
    };
}

struct CallMethodVisitor;

impl<'de> Visitor<'de> for CallMethodVisitor {
    type Value = CallMethod;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON-RPC call")
    }

    skip_scalars!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64),
        visit_str(&str)
    );

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CallMethod, A::Error> {
        let mut method = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "method" {
                method = map.next_value::<MaybeString>()?.0;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(CallMethod(method))
    }
}

struct MaybeStringVisitor;

impl<'de> Visitor<'de> for MaybeStringVisitor {
    type Value = MaybeString;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    skip_scalars!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64)
    );

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<MaybeString, E> {
        Ok(MaybeString(Some(text.to_owned())))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MaybeString, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(MaybeString(None))
    }
}

impl<'de> Deserialize<'de> for CallMethod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CallMethodVisitor)
    }
}

impl<'de> Deserialize<'de> for MaybeString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MaybeStringVisitor)
    }
}

/// Prices a request body: a batch costs the sum of its calls; a body that is not a batch (or not JSON)
/// costs one call. Only the `method` members are read.
pub(crate) fn cost(body: &[u8], credits: &MethodCredits) -> Cost {
    let body = body.trim_ascii_start();
    if body.first() == Some(&b'[') {
        if let Ok(calls) = serde_json::from_slice::<Vec<CallMethod>>(body) {
            return Cost {
                calls: calls.len() as u64,
                credits: calls
                    .iter()
                    .map(|call| u64::from(credits.of(call.0.as_deref())))
                    .sum(),
            };
        }
    }
    let method = serde_json::from_slice::<CallMethod>(body)
        .ok()
        .and_then(|call| call.0);
    Cost {
        calls: 1,
        credits: u64::from(credits.of(method.as_deref())),
    }
}

/// Why the meter refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OverLimit {
    /// Over [`FaultConfig::max_rps`] (calls per second).
    Calls,
    /// Over [`FaultConfig::max_cps`] (credits per second).
    Credits,
}

/// The calls and credits spent in the current window.
#[derive(Debug, Default)]
struct Window {
    /// When the window opened: at the first request after the previous one closed.
    start: Option<Instant>,
    calls: u64,
    credits: u64,
}

/// Fixed one-second windows of calls and credits: a request is admitted when both fit what is left of
/// the window, and then spends both.
#[derive(Debug)]
pub(crate) struct Meter {
    max_calls: Option<u64>,
    max_credits: Option<u64>,
    method_credits: MethodCredits,
    window: Mutex<Window>,
}

impl Meter {
    /// The meter of `faults`'s `max_rps` and `max_cps`; `None` when neither is set.
    pub(crate) fn of(faults: &FaultConfig) -> Option<Self> {
        if faults.max_rps.is_none() && faults.max_cps.is_none() {
            return None;
        }
        Some(Self {
            max_calls: faults.max_rps.map(u64::from),
            max_credits: faults.max_cps.map(u64::from),
            method_credits: faults.method_credits.clone(),
            window: Mutex::default(),
        })
    }

    /// Prices `body` and admits it now, or says which limit it is over.
    pub(crate) fn admit(&self, body: &[u8]) -> Result<(), OverLimit> {
        self.admit_at(Instant::now(), cost(body, &self.method_credits))
    }

    /// [`Meter::admit`] of a priced request at a given time (monotonic: `now` never goes back).
    fn admit_at(&self, now: Instant, cost: Cost) -> Result<(), OverLimit> {
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        if window
            .start
            .is_none_or(|start| now.duration_since(start) >= WINDOW)
        {
            *window = Window {
                start: Some(now),
                ..Window::default()
            };
        }
        if self
            .max_calls
            .is_some_and(|max| window.calls + cost.calls > max)
        {
            return Err(OverLimit::Calls);
        }
        if self
            .max_credits
            .is_some_and(|max| window.credits + cost.credits > max)
        {
            return Err(OverLimit::Credits);
        }
        window.calls += cost.calls;
        window.credits += cost.credits;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter(max_rps: Option<u32>, max_cps: Option<u32>) -> Meter {
        Meter::of(&FaultConfig {
            max_rps,
            max_cps,
            ..FaultConfig::default()
        })
        .expect("a limit is set")
    }

    fn calls(n: u64) -> Cost {
        Cost {
            calls: n,
            credits: 0,
        }
    }

    #[test]
    fn no_meter_without_a_limit() {
        assert!(Meter::of(&FaultConfig::default()).is_none());
    }

    #[test]
    fn the_meter_admits_max_rps_calls_per_window_then_refuses_until_the_next() {
        let meter = meter(Some(3), None);
        let start = Instant::now();
        let admitted: Vec<bool> = (0..5)
            .map(|_| meter.admit_at(start, calls(1)).is_ok())
            .collect();
        assert_eq!(admitted, [true, true, true, false, false]);
        let late = start + Duration::from_millis(999);
        assert_eq!(meter.admit_at(late, calls(1)), Err(OverLimit::Calls));
        assert!(meter.admit_at(start + WINDOW, calls(1)).is_ok());
    }

    #[test]
    fn a_batch_over_what_is_left_is_refused_whole_and_costs_nothing() {
        let meter = meter(Some(4), None);
        let start = Instant::now();
        assert_eq!(meter.admit_at(start, calls(5)), Err(OverLimit::Calls));
        assert!(meter.admit_at(start, calls(3)).is_ok());
        assert_eq!(meter.admit_at(start, calls(2)), Err(OverLimit::Calls));
        assert!(meter.admit_at(start, calls(1)).is_ok());
        assert_eq!(meter.admit_at(start, calls(1)), Err(OverLimit::Calls));
    }

    #[test]
    fn credits_are_the_sum_of_a_batch_and_refused_past_max_cps() {
        let table = MethodCredits::default();
        let body =
            br#"[{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"address":["0x1"]}]},
            {"id":2,"method":"eth_getBlockByNumber","params":["0x1",false]},
            {"id":3,"method":"eth_nonsense"},{"id":4},7]"#;
        assert_eq!(
            cost(body, &table),
            Cost {
                calls: 5,
                credits: 75 + 16 + 26 + 26 + 26
            }
        );
        let single = br#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#;
        assert_eq!(
            cost(single, &table),
            Cost {
                calls: 1,
                credits: 0
            }
        );
        assert_eq!(cost(b"not json", &table).credits, 26);
        let meter = meter(None, Some(100));
        let start = Instant::now();
        let get_logs = Cost {
            calls: 1,
            credits: 75,
        };
        assert!(meter.admit_at(start, get_logs).is_ok());
        assert_eq!(meter.admit_at(start, get_logs), Err(OverLimit::Credits));
        assert!(meter.admit_at(start + WINDOW, get_logs).is_ok());
    }

    #[test]
    fn a_price_list_replaces_the_default_one() {
        let parsed = MethodCredits::parse("eth_getLogs:75, eth_getBlockByNumber:16,default:1")
            .expect("valid");
        assert_eq!(parsed.of(Some("eth_getLogs")), 75);
        assert_eq!(parsed.of(Some("eth_getBlockReceipts")), 1);
        assert_eq!(parsed.of(None), 1);
        assert_eq!(
            MethodCredits::parse("eth_getLogs:75")
                .expect("valid")
                .default,
            DEFAULT_METHOD_CREDITS
        );
        for bad in ["eth_getLogs", "eth_getLogs:-1", ":5", "default:x"] {
            let error = MethodCredits::parse(bad).expect_err(bad);
            assert!(error.contains("METHOD:CREDITS"), "{error}");
        }
    }
}
