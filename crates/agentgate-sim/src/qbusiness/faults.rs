//! Fault and latency knobs, changeable at run time from tests (interior mutability).
//!
//! - **Latency**: every API request waits `latency` plus a uniform random `0..=jitter`.
//! - **Random failures** ([`Faults::set_rates`]): each API request (ChatSync and the
//!   List/Delete operations) fails with `InternalServerException` (500) with probability
//!   `p500`, else with `ThrottlingException` (429, `Retry-After: 1`) with probability `p429`.
//! - **Script** ([`Faults::script`]): a queue consumed by the next ChatSync requests, one
//!   entry each: one of the eight ChatSync error shapes or `"ok"` (no fault; the request
//!   proceeds). The script is consulted before random failures.
//!
//! - **Lost responses** ([`Faults::set_lost_rate`]): each API request that succeeded has
//!   its answer replaced by `InternalServerException` (500) with probability `p_lost`,
//!   *after* the handler applied it — the dangerous case, where a client that retries
//!   with a new `clientToken` would duplicate the effect. [`Faults::lose_next_answers`] loses
//!   the next N successful ChatSync answers for certain, before the random rate applies.
//!
//! Scripted and random failures are decided after authentication and before the request
//! is parsed or changes any state; only lost responses come after the effect.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;

use super::errors::{ApiError, RESOURCE_APPLICATION, RESOURCE_CONVERSATION};

/// One entry of a fault script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScriptedFault {
    /// No fault for this request.
    Ok,
    /// 400 `ValidationException`.
    ValidationException,
    /// 400 `LicenseNotFoundException`.
    LicenseNotFoundException,
    /// 403 `AccessDeniedException` (the message names `qbusiness:ChatSync`).
    AccessDeniedException,
    /// 404 `ResourceNotFoundException`.
    ResourceNotFoundException,
    /// 409 `ConflictException`.
    ConflictException,
    /// 424 `ExternalResourceException`.
    ExternalResourceException,
    /// 429 `ThrottlingException`.
    ThrottlingException,
    /// 500 `InternalServerException`.
    InternalServerException,
}

/// A script entry that is not a ChatSync error shape nor `ok`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown fault {0:?}: expected \"ok\" or one of ValidationException, \
     LicenseNotFoundException, AccessDeniedException, ResourceNotFoundException, \
     ConflictException, ExternalResourceException, ThrottlingException, InternalServerException"
)]
pub struct UnknownFault(pub String);

impl std::str::FromStr for ScriptedFault {
    type Err = UnknownFault;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "ok" | "OK" | "Ok" => Self::Ok,
            "ValidationException" => Self::ValidationException,
            "LicenseNotFoundException" => Self::LicenseNotFoundException,
            "AccessDeniedException" => Self::AccessDeniedException,
            "ResourceNotFoundException" => Self::ResourceNotFoundException,
            "ConflictException" => Self::ConflictException,
            "ExternalResourceException" => Self::ExternalResourceException,
            "ThrottlingException" => Self::ThrottlingException,
            "InternalServerException" => Self::InternalServerException,
            other => return Err(UnknownFault(other.to_owned())),
        })
    }
}

impl ScriptedFault {
    /// The error this entry injects, `None` for [`ScriptedFault::Ok`].
    pub fn error(self, application_id: &str, region: &str) -> Option<ApiError> {
        Some(match self {
            Self::Ok => return None,
            Self::ValidationException => ApiError::field(
                "userMessage",
                "Injected fault: the request failed validation",
            ),
            Self::LicenseNotFoundException => ApiError::license_not_found(
                "The user does not have an Amazon Q Business subscription for this application.",
            ),
            Self::AccessDeniedException => ApiError::access_denied(format!(
                "User: arn:aws:iam::123456789012:user/agentgate-sim is not authorized to \
                 perform: qbusiness:ChatSync on resource: \
                 arn:aws:qbusiness:{region}:123456789012:application/{application_id} \
                 because no identity-based policy allows the qbusiness:ChatSync action"
            )),
            Self::ResourceNotFoundException => {
                ApiError::not_found(RESOURCE_APPLICATION, application_id)
            }
            Self::ConflictException => ApiError::conflict(
                "The conversation is being modified by another request. Retry later.",
                RESOURCE_CONVERSATION,
                application_id,
            ),
            Self::ExternalResourceException => ApiError::external_resource(
                "An external resource that the application depends on failed to respond.",
            ),
            Self::ThrottlingException => ApiError::throttling(),
            Self::InternalServerException => {
                ApiError::internal("An internal error occurred. Retry the request.")
            }
        })
    }
}

#[derive(Debug, Default)]
struct Knobs {
    latency: Duration,
    jitter: Duration,
    p500: f64,
    p429: f64,
    p_lost: f64,
    lose_chat_syncs: u32,
    script: VecDeque<ScriptedFault>,
}

/// The fault and latency knobs of one emulator (see the module docs).
#[derive(Debug, Default)]
pub struct Faults {
    knobs: Mutex<Knobs>,
}

impl Faults {
    fn knobs(&self) -> std::sync::MutexGuard<'_, Knobs> {
        self.knobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the fixed latency and the jitter added to every API request.
    pub fn set_latency(&self, latency: Duration, jitter: Duration) {
        let mut k = self.knobs();
        k.latency = latency;
        k.jitter = jitter;
    }

    /// Sets the random failure rates (each clamped to `0..=1`).
    pub fn set_rates(&self, p500: f64, p429: f64) {
        let mut k = self.knobs();
        k.p500 = p500.clamp(0.0, 1.0);
        k.p429 = p429.clamp(0.0, 1.0);
    }

    /// Sets the probability (clamped to `0..=1`) that a successful answer is lost after
    /// its effect was applied (see the module docs).
    pub fn set_lost_rate(&self, p_lost: f64) {
        self.knobs().p_lost = p_lost.clamp(0.0, 1.0);
    }

    /// Appends entries to the ChatSync fault script.
    ///
    /// # Panics
    /// On an entry that is neither `"ok"` nor a ChatSync error shape name; use
    /// [`Faults::try_script`] to get an error instead.
    pub fn script<I, S>(&self, entries: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if let Err(e) = self.try_script(entries) {
            panic!("{e}");
        }
    }

    /// Appends entries to the ChatSync fault script; nothing is appended if one is unknown.
    pub fn try_script<I, S>(&self, entries: I) -> Result<(), UnknownFault>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let parsed = entries
            .into_iter()
            .map(|e| e.as_ref().parse())
            .collect::<Result<Vec<ScriptedFault>, _>>()?;
        self.knobs().script.extend(parsed);
        Ok(())
    }

    /// Script entries not consumed yet.
    pub fn pending_script(&self) -> usize {
        self.knobs().script.len()
    }

    /// Clears the script and the random rates, lost answers included (latency stays).
    pub fn clear(&self) {
        let mut k = self.knobs();
        k.script.clear();
        k.p500 = 0.0;
        k.p429 = 0.0;
        k.p_lost = 0.0;
        k.lose_chat_syncs = 0;
    }

    /// Loses the answers of the next `n` successful ChatSync requests, turn applied.
    pub fn lose_next_answers(&self, n: u32) {
        self.knobs().lose_chat_syncs = n;
    }

    /// Whether the answer to a request that succeeded is lost: one of the
    /// ChatSyncs [`Faults::lose_next_answers`] asked for, else per the rate.
    pub(crate) fn lose_answer(&self, chat_sync: bool) -> bool {
        let mut k = self.knobs();
        if chat_sync && k.lose_chat_syncs > 0 {
            k.lose_chat_syncs -= 1;
            return true;
        }
        k.p_lost > 0.0 && rand::rng().random_bool(k.p_lost)
    }

    /// The delay for the next request.
    pub(crate) fn delay(&self) -> Duration {
        let k = self.knobs();
        if k.jitter.is_zero() {
            return k.latency;
        }
        let extra = rand::rng().random_range(0..=k.jitter.as_micros());
        k.latency + Duration::from_micros(u64::try_from(extra).unwrap_or(u64::MAX))
    }

    /// A random failure, per the rates.
    pub(crate) fn random_fault(&self) -> Option<ApiError> {
        let (p500, p429) = {
            let k = self.knobs();
            (k.p500, k.p429)
        };
        if p500 <= 0.0 && p429 <= 0.0 {
            return None;
        }
        let mut rng = rand::rng();
        if rng.random_bool(p500) {
            return Some(ApiError::internal(
                "An internal error occurred. Retry the request.",
            ));
        }
        if rng.random_bool(p429) {
            return Some(ApiError::throttling());
        }
        None
    }

    /// The fault for the next ChatSync request: the next script entry if any (an `ok`
    /// entry means none), else a random failure.
    pub(crate) fn chat_sync_fault(&self, application_id: &str, region: &str) -> Option<ApiError> {
        let scripted = self.knobs().script.pop_front();
        match scripted {
            Some(entry) => entry.error(application_id, region),
            None => self.random_fault(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_is_consumed_in_order() {
        let faults = Faults::default();
        faults.script(["ThrottlingException", "ok", "AccessDeniedException"]);
        assert_eq!(faults.pending_script(), 3);
        let codes: Vec<Option<&str>> = (0..4)
            .map(|_| faults.chat_sync_fault("app", "us-east-1").map(|e| e.code()))
            .collect();
        assert_eq!(
            codes,
            vec![
                Some("ThrottlingException"),
                None,
                Some("AccessDeniedException"),
                None
            ]
        );
    }

    #[test]
    fn unknown_entries_are_rejected_whole() {
        let faults = Faults::default();
        let err = faults.try_script(["ok", "Nope"]).expect_err("unknown");
        assert_eq!(err, UnknownFault("Nope".into()));
        assert_eq!(faults.pending_script(), 0);
    }

    #[test]
    fn access_denied_names_the_action() {
        let err = ScriptedFault::AccessDeniedException
            .error("app", "us-east-1")
            .expect("error");
        assert!(err.message().contains("qbusiness:ChatSync"));
    }

    #[test]
    fn certain_rates_always_fail() {
        let faults = Faults::default();
        faults.set_rates(1.0, 0.0);
        assert_eq!(
            faults.random_fault().map(|e| e.code()),
            Some("InternalServerException")
        );
        faults.set_rates(0.0, 1.0);
        assert_eq!(
            faults.random_fault().map(|e| e.code()),
            Some("ThrottlingException")
        );
        faults.clear();
        assert!(faults.random_fault().is_none());
    }

    #[test]
    fn lost_answers_follow_their_rate() {
        let faults = Faults::default();
        assert!(!faults.lose_answer(true));
        faults.set_lost_rate(1.0);
        assert!(faults.lose_answer(false));
        faults.clear();
        assert!(!faults.lose_answer(false));
        faults.lose_next_answers(1);
        assert!(
            !faults.lose_answer(false),
            "only ChatSync answers are counted"
        );
        assert!(faults.lose_answer(true));
        assert!(!faults.lose_answer(true));
    }
}
