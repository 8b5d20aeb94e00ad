//! Closed-loop load: `workers` clients each repeat one operation as fast as
//! the server answers. A warm-up phase is thrown away, then each round is
//! measured on its own (throughput, p50, p99) and the medians over the rounds
//! are reported, so one noisy second on a shared machine does not decide.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

/// How long to warm up and how many rounds of what length to measure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub warmup: Duration,
    pub rounds: usize,
    pub round: Duration,
}

/// Medians over the rounds.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Measured {
    pub workers: usize,
    pub rounds: usize,
    /// Completed operations per second.
    pub ops_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Operations that failed (over warm-up and rounds).
    pub errors: u64,
    /// The first failure, to say what went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

/// Runs `op` in `workers` concurrent loops under `plan`. `make(worker)`
/// builds each worker's operation (its own client and state).
pub(crate) async fn run<M, O, F>(workers: usize, plan: Plan, make: M) -> Measured
where
    M: Fn(usize) -> O,
    O: FnMut() -> F + Send + 'static,
    F: Future<Output = anyhow::Result<()>> + Send,
{
    // 0 = warm-up, 1..=rounds = measured rounds, rounds + 1 = stop.
    let phase = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(workers);
    for worker in 0..workers {
        let mut op = make(worker);
        let phase = phase.clone();
        let stop = plan.rounds + 1;
        handles.push(tokio::spawn(async move {
            let mut samples: Vec<(usize, Duration)> = Vec::new();
            let mut errors = 0u64;
            let mut first_error = None;
            loop {
                let started_in = phase.load(Ordering::Relaxed);
                if started_in >= stop {
                    break;
                }
                let start = Instant::now();
                match op().await {
                    Ok(()) => {
                        // Counted in the round it completed in.
                        let now = phase.load(Ordering::Relaxed);
                        if (1..stop).contains(&now) {
                            samples.push((now, start.elapsed()));
                        }
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| format!("{e:#}"));
                        // A failing server must not be hammered in a tight loop.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
            (samples, errors, first_error)
        }));
    }
    tokio::time::sleep(plan.warmup).await;
    for round in 1..=plan.rounds + 1 {
        phase.store(round, Ordering::Relaxed);
        if round <= plan.rounds {
            tokio::time::sleep(plan.round).await;
        }
    }
    let mut by_round: Vec<Vec<Duration>> = vec![Vec::new(); plan.rounds + 1];
    let mut errors = 0;
    let mut first_error = None;
    for handle in handles {
        match handle.await {
            Ok((samples, e, first)) => {
                errors += e;
                if first_error.is_none() {
                    first_error = first;
                }
                for (round, latency) in samples {
                    by_round[round].push(latency);
                }
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| format!("worker panicked: {e}"));
            }
        }
    }
    let mut rps = Vec::new();
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    for mut latencies in by_round.into_iter().skip(1) {
        if latencies.is_empty() {
            continue;
        }
        latencies.sort_unstable();
        rps.push(latencies.len() as f64 / plan.round.as_secs_f64());
        p50.push(ms(percentile(&latencies, 0.50)));
        p99.push(ms(percentile(&latencies, 0.99)));
    }
    Measured {
        workers,
        rounds: rps.len(),
        ops_per_sec: median(rps),
        p50_ms: median(p50),
        p99_ms: median(p99),
        errors,
        first_error,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The nearest-rank percentile of sorted samples.
pub(crate) fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "q is in 0..=1, so the rank is between 0 and the sample count"
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The median (mean of the middle two for an even count); 0 when empty.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 0.5), Duration::from_millis(50));
        assert_eq!(percentile(&sorted, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
    }
}
