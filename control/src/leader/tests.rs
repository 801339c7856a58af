use super::*;

const NAME: &str = "liqo-controller-manager";

fn held(holder: Option<&str>, secs: i32, transitions: i32, renewed: i64) -> Lease {
    Lease {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some("liqo".into()),
            resource_version: Some("7".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: Some(secs),
            lease_transitions: Some(transitions),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            ..Default::default()
        }),
    }
}

#[test]
fn timing_refuses_unsafe_durations_naming_them() {
    let s = Duration::from_secs;
    assert!(Timing::new(s(15), s(10), s(2)).is_ok());
    assert_eq!(Timing::default(), Timing::new(s(10), s(7), s(2)).unwrap());
    let e = Timing::new(s(10), s(10), s(2)).unwrap_err();
    assert!(e.to_string().contains("10s"), "{e}");
    assert!(matches!(e, TimingError::DeadlineNotShorter { .. }));
    assert!(matches!(
        Timing::new(s(15), s(10), s(9)),
        Err(TimingError::RetryTooLong { .. })
    ));
    assert!(matches!(
        Timing::new(s(15), s(10), Duration::ZERO),
        Err(TimingError::RetryTooLong { .. })
    ));
    assert!(matches!(
        Timing::new(
            Duration::from_millis(500),
            Duration::from_millis(400),
            Duration::from_millis(100)
        ),
        Err(TimingError::TooShort(_))
    ));
    let t = Timing::new(Duration::from_millis(15_500), s(10), s(2)).unwrap();
    assert_eq!(t.lease_secs(), 16);
}

#[test]
fn an_absent_lease_is_created_and_ours_renewed() {
    let now = Instant::now();
    assert_eq!(decide("a", None, None, now), (Step::Create, None));
    let ours = held(Some("a"), 15, 3, 100);
    let (step, seen) = decide("a", Some(&ours), None, now);
    assert_eq!(step, Step::Write { taken: false });
    assert_eq!(seen.unwrap().record.holder.as_deref(), Some("a"));
}

#[test]
fn anothers_lease_is_fresh_for_its_duration_after_we_last_saw_it_change() {
    let t0 = Instant::now();
    let theirs = held(Some("b"), 15, 0, 100);
    let (step, seen) = decide("a", Some(&theirs), None, t0);
    assert_eq!(
        step,
        Step::Follow {
            holder: "b".into(),
            expires_in: Duration::from_secs(15)
        }
    );
    // The same record 10 s later: 5 s left, judged from when we first saw it.
    let t10 = t0 + Duration::from_secs(10);
    let (step, seen) = decide("a", Some(&theirs), seen.as_ref(), t10);
    assert_eq!(
        step,
        Step::Follow {
            holder: "b".into(),
            expires_in: Duration::from_secs(5)
        }
    );
    assert_eq!(seen.as_ref().unwrap().at, t0);
    // Renewed (its renewTime changed, whatever its clock says): fresh again from now.
    let renewed = held(Some("b"), 15, 0, 50);
    let (step, seen2) = decide("a", Some(&renewed), seen.as_ref(), t10);
    assert!(
        matches!(step, Step::Follow { expires_in, .. } if expires_in == Duration::from_secs(15))
    );
    assert_eq!(seen2.unwrap().at, t10);
    // Not renewed for its whole duration: taken.
    let t15 = t0 + Duration::from_secs(15);
    let (step, _) = decide("a", Some(&theirs), seen.as_ref(), t15);
    assert_eq!(step, Step::Write { taken: true });
}

#[test]
fn a_renew_time_far_in_the_past_is_not_expiry_when_we_just_saw_it() {
    // The holder's clock is an hour behind ours: the record is still fresh, on our clock.
    let now = Instant::now();
    let skewed = held(Some("b"), 15, 0, 0);
    let (step, _) = decide("a", Some(&skewed), None, now);
    assert!(matches!(step, Step::Follow { .. }), "{step:?}");
}

#[test]
fn a_released_lease_is_taken_at_once_and_counts_a_transition() {
    let now = Instant::now();
    let wall = Timestamp::from_second(1_000).unwrap();
    let timing = Timing::default();
    let theirs = held(Some("b"), 15, 4, 100);
    let free = released(&theirs, "b", wall).unwrap();
    assert_eq!(Record::of(&free).holder, None);
    assert_eq!(free.spec.as_ref().unwrap().lease_duration_seconds, Some(1));
    assert_eq!(free.metadata.resource_version.as_deref(), Some("7"));
    // Only the holder releases.
    assert_eq!(released(&theirs, "a", wall), None);
    let (step, _) = decide("a", Some(&free), None, now);
    assert_eq!(step, Step::Write { taken: true });
    let mine = written(Some(&free), NAME, "liqo", "a", true, &timing, wall);
    let spec = mine.spec.as_ref().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_transitions, Some(5));
    assert_eq!(spec.acquire_time, Some(MicroTime(wall)));
    assert_eq!(spec.lease_duration_seconds, Some(10));
    // The precondition of the replace.
    assert_eq!(mine.metadata.resource_version.as_deref(), Some("7"));
}

#[test]
fn a_renewal_keeps_the_acquire_time_and_the_transitions() {
    let timing = Timing::default();
    let mut ours = held(Some("a"), 15, 2, 100);
    let acquired = MicroTime(Timestamp::from_second(90).unwrap());
    ours.spec.as_mut().unwrap().acquire_time = Some(acquired.clone());
    let wall = Timestamp::from_second(102).unwrap();
    let renewed = written(Some(&ours), NAME, "liqo", "a", false, &timing, wall);
    let spec = renewed.spec.unwrap();
    assert_eq!(spec.acquire_time, Some(acquired));
    assert_eq!(spec.lease_transitions, Some(2));
    assert_eq!(spec.renew_time, Some(MicroTime(wall)));
    // A new Lease: named, acquired now, no transition.
    let new = written(None, NAME, "liqo", "a", false, &timing, wall);
    assert_eq!(new.metadata.name.as_deref(), Some(NAME));
    assert_eq!(new.metadata.namespace.as_deref(), Some("liqo"));
    assert_eq!(new.spec.unwrap().lease_transitions, Some(0));
}

#[test]
fn a_leader_loses_at_the_renew_deadline() {
    let t = Timing::default();
    let renewed = Instant::now();
    assert!(!lost(renewed, renewed + Duration::from_secs(6), &t));
    assert!(lost(renewed, renewed + Duration::from_secs(7), &t));
}

#[test]
fn after_a_failed_renewal_the_next_try_is_a_retry_period_later_if_it_can_still_count() {
    let t = Timing::default(); // deadline 7 s, retry 2 s
    let s = Duration::from_secs;
    let renewed = Instant::now();
    assert_eq!(
        retry_after_failure(renewed, renewed + s(2), &t),
        Some(renewed + s(4))
    );
    assert_eq!(
        retry_after_failure(renewed, renewed + Duration::from_millis(4_900), &t),
        Some(renewed + Duration::from_millis(6_900)),
        "the last try that starts before the deadline"
    );
    assert_eq!(
        retry_after_failure(renewed, renewed + s(5), &t),
        None,
        "the next try would start at the deadline"
    );
    assert_eq!(
        retry_after_failure(renewed, renewed + s(8), &t),
        None,
        "lost"
    );
}
