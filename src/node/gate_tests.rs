use std::sync::Arc;

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use super::super::rate::WINDOW;
use super::super::Limits;
use super::*;

fn limits(requests_per_second: u32) -> Limits {
    Limits {
        max_concurrency: 4,
        requests_per_second,
        credits: None,
        max_retries: 3,
        initial_backoff: Duration::from_secs(5),
        max_backoff: Duration::from_secs(60),
    }
}

/// A provider that is never reached (the requests under test ignore the client).
fn provider(name: &str, limits: Limits) -> Provider {
    let url = crate::config::SecretUrl::new(url::Url::parse("http://127.0.0.1:9/v3/k").unwrap());
    let options = crate::rpc::ClientOptions {
        request_timeout: Duration::from_secs(1),
        max_response_bytes: 1 << 20,
        max_idle_connections: 1,
    };
    let client = Client::http(&url, options).unwrap();
    Provider::new(name.into(), url.to_string(), client, limits)
}

fn gate(limits: Limits, cancel: CancellationToken) -> Gate {
    Gate::new(vec![provider("p", limits)], cancel)
}

fn transient() -> rpc::Error {
    rpc::Error::Http {
        status: 503,
        retry_after: None,
    }
}

/// Runs `gate.run` in the background and fires `cancel` once the gate is in the wait under test, then
/// asserts the run ended with `Interrupted` without time moving on.
async fn assert_interrupted_promptly(
    gate: Arc<Gate>,
    cancel: CancellationToken,
    request: impl Fn() -> Result<(), rpc::Error> + Send + Sync + 'static,
    waiting: impl Future<Output = ()>,
) {
    let running = tokio::spawn(async move {
        gate.run("eth_blockNumber", OnSplit::Retry, |_| {
            let answer = request();
            async move { answer }
        })
        .await
    });
    waiting.await;
    let fired_at = Instant::now();
    cancel.cancel();
    let result = running.await.expect("the run does not panic");
    assert!(
        matches!(result, Err(Error::Interrupted)),
        "{result:?} instead of Interrupted"
    );
    assert_eq!(
        Instant::now(),
        fired_at,
        "the gate waited on after the token fired"
    );
}

/// Lets every task that can run, run (time is paused, so nothing advances the clock meanwhile).
async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn cancellation_ends_a_backoff_sleep_at_once() {
    let cancel = CancellationToken::new();
    let gate = Arc::new(gate(limits(100), cancel.clone()));
    let stats_gate = gate.clone();
    assert_interrupted_promptly(gate, cancel, || Err(transient()), async move {
        // The first attempt failed and the gate sleeps (up to 5 s) before the second.
        while stats_gate.stats.retries.load(Ordering::Relaxed) == 0 {
            settle().await;
        }
        settle().await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn cancellation_ends_the_wait_for_a_permit_at_once() {
    let cancel = CancellationToken::new();
    let mut gate_limits = limits(100);
    gate_limits.max_concurrency = 1;
    let gate = Arc::new(gate(gate_limits, cancel.clone()));
    // The only permit is held by a request that never ends.
    let holder = gate.clone();
    let _hanging = tokio::spawn(async move {
        holder
            .run("eth_getLogs", OnSplit::Return, |_| {
                std::future::pending::<Result<(), rpc::Error>>()
            })
            .await
    });
    settle().await;
    assert_eq!(gate.providers()[0].permits.available_permits(), 0);
    assert_interrupted_promptly(gate, cancel, || Ok(()), settle()).await;
}

#[tokio::test(start_paused = true)]
async fn cancellation_ends_the_wait_for_the_rate_at_once() {
    let cancel = CancellationToken::new();
    let gate = Arc::new(gate(limits(2), cancel.clone()));
    // Two calls take the whole second's budget; the third waits for the window to move.
    for _ in 0..2 {
        gate.run("eth_chainId", OnSplit::Retry, |_| async { Ok(()) })
            .await
            .expect("within the rate");
    }
    assert_interrupted_promptly(gate.clone(), cancel, || Ok(()), settle()).await;
    assert_eq!(gate.stats.requests.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn cancellation_abandons_a_request_in_flight() {
    let cancel = CancellationToken::new();
    let gate = Arc::new(gate(limits(100), cancel.clone()));
    let running = tokio::spawn({
        let gate = gate.clone();
        async move {
            gate.run("eth_getLogs", OnSplit::Return, |_| {
                std::future::pending::<Result<(), rpc::Error>>()
            })
            .await
        }
    });
    settle().await;
    cancel.cancel();
    let result = running.await.expect("no panic");
    assert!(matches!(result, Err(Error::Interrupted)), "{result:?}");
}

#[tokio::test(start_paused = true)]
async fn a_token_fired_before_the_call_sends_nothing() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let gate = gate(limits(100), cancel);
    let result = gate
        .run("eth_chainId", OnSplit::Retry, |_| async { Ok(()) })
        .await;
    assert!(matches!(result, Err(Error::Interrupted)), "{result:?}");
    assert_eq!(gate.stats.requests.load(Ordering::Relaxed), 0);
}

/// The time each of `costs` (calls per request, sent one after the other) was let through, from the
/// first, at `requests_per_second`.
async fn admission_times(requests_per_second: u32, costs: &[usize]) -> Vec<Duration> {
    let gate = gate(limits(requests_per_second), CancellationToken::new());
    let start = Instant::now();
    let mut times = Vec::new();
    for &n_calls in costs {
        gate.send(
            Call::new("eth_getBlockByNumber").calls(n_calls),
            |_| async { Ok(()) },
        )
        .await
        .expect("no error");
        times.push(Instant::now() - start);
    }
    times
}

#[tokio::test(start_paused = true)]
async fn a_batch_of_n_calls_costs_n_of_the_rate() {
    let window = WINDOW;
    // 5 per second: a batch of 5 takes the whole window, so the next single call waits for it to pass.
    assert_eq!(admission_times(5, &[5, 1]).await, [Duration::ZERO, window]);
    // 3 + 2 fit together; the third batch waits for the first to leave the window, then the next
    // single call waits for the second.
    assert_eq!(
        admission_times(5, &[3, 2, 3, 2]).await,
        [Duration::ZERO, Duration::ZERO, window, window]
    );
    // Single calls: five at once, then each as the oldest leaves.
    assert_eq!(
        admission_times(5, &[1, 1, 1, 1, 1, 1]).await,
        [Duration::ZERO; 5]
            .into_iter()
            .chain([window])
            .collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn no_window_of_a_second_ever_holds_more_calls_than_the_rate() {
    let gate = Arc::new(gate(limits(7), CancellationToken::new()));
    let sent: Arc<Mutex<Vec<(Instant, usize)>>> = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..12usize {
        let (gate, sent) = (gate.clone(), sent.clone());
        tasks.spawn(async move {
            for round in 0..6 {
                let n_calls = 1 + (task * 3 + round) % 7;
                gate.send(Call::new("eth_getBlockByNumber").calls(n_calls), |_| {
                    sent.lock().unwrap().push((Instant::now(), n_calls));
                    async { Ok(()) }
                })
                .await
                .expect("no error");
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let sent = sent.lock().unwrap();
    for &(from, _) in sent.iter() {
        let in_window: usize = sent
            .iter()
            .filter(|(at, _)| *at >= from && *at < from + WINDOW)
            .map(|(_, n)| n)
            .sum();
        assert!(
            in_window <= 7,
            "{in_window} calls in the window from {from:?}"
        );
    }
    assert_eq!(sent.len(), 72);
}

/// Which provider of `gate` the client `client` is.
fn which(gate: &Gate, client: &Arc<Client>) -> usize {
    gate.providers()
        .iter()
        .position(|p| Arc::ptr_eq(p.client(), client))
        .expect("a provider's client")
}

fn two(first: Limits, second: Limits) -> Arc<Gate> {
    let gate = Gate::new(
        vec![provider("a", first), provider("b", second)],
        CancellationToken::new(),
    );
    for p in gate.providers() {
        p.set_chain_checked();
    }
    Arc::new(gate)
}

#[tokio::test(start_paused = true)]
async fn a_failing_provider_is_set_aside_and_its_requests_go_to_the_other() {
    let gate = two(limits(100), limits(100));
    let answered_by = Arc::new(Mutex::new(Vec::new()));
    for _ in 0..20 {
        let (g, answered) = (gate.clone(), answered_by.clone());
        let value = gate
            .run("eth_blockNumber", OnSplit::Retry, move |client| {
                let index = which(&g, &client);
                let answer = if index == 0 {
                    Err(transient())
                } else {
                    Ok(7u64)
                };
                answered.lock().unwrap().push(index);
                async move { answer }
            })
            .await
            .expect("the other provider answers");
        assert_eq!(value, 7);
    }
    let sent_to_a = answered_by
        .lock()
        .unwrap()
        .iter()
        .filter(|i| **i == 0)
        .count();
    // Set aside after three failures in a row; no sleeping through backoffs while b answers.
    assert!(
        sent_to_a <= 3,
        "{sent_to_a} requests went to the failing provider"
    );
    assert_eq!(gate.providers()[0].snapshot().state, "set aside");
    assert_eq!(gate.providers()[1].snapshot().state, "up");
}

#[tokio::test(start_paused = true)]
async fn the_job_fails_only_when_every_provider_spent_its_retries() {
    let gate = two(limits(100), limits(100));
    let result = gate
        .run("eth_blockNumber", OnSplit::Retry, |_| async {
            Err::<u64, _>(transient())
        })
        .await;
    match result {
        // max_retries = 3 at each: four attempts each.
        Err(Error::Exhausted { attempts, .. }) => assert_eq!(attempts, 8),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_provider_behind_the_block_asked_for_is_not_asked() {
    let gate = two(limits(100), limits(100));
    gate.providers()[0].saw_head(90);
    gate.providers()[1].saw_head(120);
    for _ in 0..10 {
        let g = gate.clone();
        let index = gate
            .send(Call::new("eth_getLogs").up_to(100), move |client| {
                let index = which(&g, &client);
                async move { Ok(index) }
            })
            .await
            .unwrap();
        assert_eq!(index, 1);
    }
}

#[tokio::test(start_paused = true)]
async fn requests_spread_over_providers_by_their_rates() {
    let gate = two(limits(10), limits(30));
    let served = Arc::new(Mutex::new([0usize; 2]));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (gate, served) = (gate.clone(), served.clone());
        tasks.spawn(async move {
            for _ in 0..20 {
                let g = gate.clone();
                let served = served.clone();
                gate.run("eth_blockNumber", OnSplit::Retry, move |client| {
                    served.lock().unwrap()[which(&g, &client)] += 1;
                    async { Ok(()) }
                })
                .await
                .unwrap();
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let [a, b] = *served.lock().unwrap();
    assert_eq!(a + b, 160);
    // Three times the rate: about three times the requests.
    assert!(b > 2 * a && a > 0, "a served {a}, b served {b}");
}

/// A provider that refuses for its rate whenever more than `limit` calls arrived in the last second.
struct Limited {
    limit: usize,
    arrivals: Mutex<std::collections::VecDeque<Instant>>,
}

impl Limited {
    fn answer(&self, calls: usize) -> Result<(), rpc::Error> {
        let now = Instant::now();
        let mut arrivals = self.arrivals.lock().unwrap();
        while arrivals
            .front()
            .is_some_and(|at| *at + Duration::from_secs(1) <= now)
        {
            arrivals.pop_front();
        }
        if arrivals.len() + calls > self.limit {
            return Err(rpc::Error::Http {
                status: 429,
                retry_after: None,
            });
        }
        arrivals.extend(std::iter::repeat_n(now, calls));
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_rate_above_the_keys_limit_is_learned_down_without_failing() {
    // Configured at 24 calls a second; the key takes 8.
    let gate = Arc::new(gate(limits(24), CancellationToken::new()));
    let node = Arc::new(Limited {
        limit: 8,
        arrivals: Mutex::default(),
    });
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (gate, node) = (gate.clone(), node.clone());
        tasks.spawn(async move {
            for _ in 0..50 {
                let node = node.clone();
                gate.run("eth_blockNumber", OnSplit::Retry, move |_| {
                    let answer = node.answer(1);
                    async move { answer }
                })
                .await
                .expect("never exhausted by the rate");
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let elapsed = Instant::now() - start;
    let refused = gate.stats.rate_limited.load(Ordering::Relaxed);
    let sent = gate.stats.requests.load(Ordering::Relaxed);
    assert!(
        refused * 10 < sent,
        "{refused} of {sent} requests refused for the rate"
    );
    // 200 calls at 8 a second take 25 s at best.
    assert!(
        elapsed < Duration::from_secs(25 * 13 / 10),
        "{elapsed:?} for 200 calls at 8/s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_batch_refused_for_the_rate_comes_back_oversized() {
    let gate = gate(limits(20), CancellationToken::new());
    let node = Limited {
        limit: 8,
        arrivals: Mutex::default(),
    };
    let result = gate
        .send(Call::new("eth_getBlockByNumber").calls(20), |_| {
            let answer = node.answer(20);
            async move { answer }
        })
        .await;
    assert!(
        matches!(
            result,
            Err(Error::Oversized {
                calls: 20,
                admits: 6
            })
        ),
        "{result:?}"
    );
    assert!(gate.max_calls_per_request("eth_getBlockByNumber") < 20);
}
